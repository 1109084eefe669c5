#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on fixed inputs: the goldens qkv.attention is compared
with (python/tests/test_attention.py, test_matches_pytorch_sdpa_goldens_forward_and_backward). Run with the venv of bench/setup_torch_venv.sh:

    "$VENV/bin/python" tests/golden/make_sdpa_goldens.py   # writes tests/golden/sdpa/sdpa.npz

Each case stores its inputs, its arguments and torch's output in float64 (PyTorch's math backend
on CPU, float64, so the goldens carry no float32 rounding), plus the gradients of
sum(out * grad_out) with respect to q, k and v by autograd. Cases: every mask kind (none, bool,
float, broadcast), is_causal with L < S, L = S and L > S, GQA (enable_gqa), explicit scale,
ranks 2 to 4, and a fully masked row left out (PyTorch gives NaN there; qkv gives 0, by design).
"""

import json
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdpa", "sdpa.npz")


def case(rng, name, q_shape, k_shape, v_shape, mask=None, is_causal=False, scale=None,
         enable_gqa=False):
    q = rng.standard_normal(q_shape)
    k = rng.standard_normal(k_shape)
    v = rng.standard_normal(v_shape)
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    tm = None if mask is None else torch.tensor(mask)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=is_causal,
                                             scale=scale, enable_gqa=enable_gqa)
    g = rng.standard_normal(out.shape)
    (out * torch.tensor(g)).sum().backward()
    assert torch.isfinite(out).all(), name
    arrays = {"q": q, "k": k, "v": v, "out": out.detach().numpy(), "grad_out": g,
              "dq": tq.grad.numpy(), "dk": tk.grad.numpy(), "dv": tv.grad.numpy()}
    if mask is not None:
        arrays["mask"] = mask
    args = {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa}
    return name, arrays, args


def main():
    rng = np.random.default_rng(20241124)
    b, h, L, S, E = 2, 3, 5, 7, 8
    bool_mask = rng.random((b, h, L, S)) < 0.7
    bool_mask[..., 0] = True  # no fully masked row: PyTorch gives NaN there, qkv 0
    float_mask = np.where(rng.random((L, S)) < 0.2, -np.inf, rng.standard_normal((L, S)))
    float_mask[:, 0] = 0.0
    cases = [
        case(rng, "plain", (b, h, L, E), (b, h, S, E), (b, h, S, E)),
        case(rng, "value_dim", (b, h, L, E), (b, h, S, E), (b, h, S, 5)),
        case(rng, "scale", (b, h, L, E), (b, h, S, E), (b, h, S, E), scale=0.3),
        case(rng, "bool_mask", (b, h, L, E), (b, h, S, E), (b, h, S, E), mask=bool_mask),
        case(rng, "float_mask_broadcast", (b, h, L, E), (b, h, S, E), (b, h, S, E),
             mask=float_mask),
        case(rng, "bool_mask_per_key", (b, h, L, E), (b, h, S, E), (b, h, S, E),
             mask=np.arange(S)[None, None, None, :] < np.array([4, 7])[:, None, None, None]),
        case(rng, "causal_square", (b, h, 6, E), (b, h, 6, E), (b, h, 6, E), is_causal=True),
        case(rng, "causal_wide", (b, h, 4, E), (b, h, 9, E), (b, h, 9, E), is_causal=True),
        case(rng, "causal_tall", (b, h, 9, E), (b, h, 4, E), (b, h, 4, E), is_causal=True),
        case(rng, "gqa", (b, 6, L, E), (b, 2, S, E), (b, 2, S, E), enable_gqa=True),
        case(rng, "gqa_causal", (1, 8, 6, E), (1, 2, 6, E), (1, 2, 6, E), is_causal=True,
             enable_gqa=True),
        case(rng, "rank3", (h, L, E), (h, S, E), (h, S, E)),
        case(rng, "rank2", (L, E), (S, E), (S, E), is_causal=True),
    ]
    arrays, meta = {}, {}
    for name, a, args in cases:
        for key, value in a.items():
            arrays[f"{name}/{key}"] = value
        meta[name] = args
    arrays["meta"] = np.array(json.dumps(meta))
    arrays["torch_version"] = np.array(torch.__version__)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {len(cases)} cases to {OUT} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
