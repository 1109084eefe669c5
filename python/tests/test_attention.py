"""qkv.attention and qkv.attention_backward against the independent float64 NumPy reference
(tests/golden/attend_numpy.py) on every score, mask, causal alignment and grouped-query case;
float32 within docs/CONVENTIONS.md §1.1; gradients against central finite differences; arrays
read in place; bad arguments as exceptions; the GIL released while the kernels run."""

import math
import re
import threading

import numpy as np
import pytest

import qkv
from conftest import attend_numpy as ref
from conftest import python_runs_during

SCORES = ["scaled_dot", "dot", "general", "additive", "laplace", "cosine", "uniform"]


def params_for(rng, score, dq, dk):
    """The reference's params tuple and qkv's params dict for `score`."""
    p = ref.make_params(rng, score, dq, dk)
    names = {"general": ["w"], "additive": ["w_q", "w_k", "v"]}.get(score, [])
    return p, dict(zip(names, p))


def check(got, expected, what):
    ok, max_abs, max_rel, why = ref.compare(got, expected)
    assert ok, f"{what}: {why} (max abs {max_abs:.3g}, max rel {max_rel:.3g})"


# ---- forward, float64, against the reference ------------------------------------------------

MASKS = ["none", "bool", "float"]
CAUSAL = [None, "top_left", "bottom_right"]


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("causal", CAUSAL)
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (3, 1)])
def test_forward_float64_matches_the_reference(score, causal, mask_kind, hq, hkv):
    rng = np.random.default_rng(hash((score, causal, mask_kind, hq)) % 2**32)
    B, L, S, D, Dv = 2, 5, 7, 6, 3
    q = rng.standard_normal((B, hq, L, D))
    k = rng.standard_normal((B, hkv, S, D))
    v = rng.standard_normal((B, hkv, S, Dv))
    p, params = params_for(rng, score, D, D)
    mask = None
    if mask_kind == "bool":
        mask = rng.random((B, 1, L, S)) < 0.7  # broadcast over heads; some rows fully masked
    elif mask_kind == "float":
        mask = np.where(rng.random((L, S)) < 0.2, -np.inf, rng.standard_normal((L, S)))
    if causal is not None and mask is not None:
        # PyTorch forbids attn_mask with is_causal; the causal mask goes into attn_mask instead.
        i, j = np.arange(L)[:, None], np.arange(S)[None, :]
        tri = j <= (i if causal == "top_left" else i + S - L)
        mask = (mask & tri) if mask.dtype == bool else np.where(tri, mask, -np.inf)
        causal_arg = None
    else:
        causal_arg = causal
    out, w = qkv.attention(q, k, v, attn_mask=mask, is_causal=causal_arg is not None,
                           causal_alignment=causal_arg or "top_left", enable_gqa=hq != hkv,
                           score=score, params=params, need_weights=True)
    r_out, r_w, _ = ref.reference(q, k, v, score=score.replace("_", "-"), mask=mask,
                                  causal=causal_arg and causal_arg.replace("_", "-"), params=p)
    assert out.dtype == np.float64 and out.shape == (B, hq, L, Dv)
    check(out, r_out, "out")
    check(w, r_w, "weights")


@pytest.mark.parametrize("shape", [(5, 6), (3, 5, 6)])
def test_rank_2_and_3_keep_their_rank(shape):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(shape) for _ in range(3))
    out = qkv.attention(q, k, v, is_causal=True)
    assert out.shape == shape
    four = lambda a: a.reshape((1,) * (4 - a.ndim) + a.shape)
    r_out, _, _ = ref.reference(four(q), four(k), four(v), causal="top-left")
    check(out, r_out.reshape(shape), "out")


def test_scale_and_normalize_none():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 4, 5)) for _ in range(3))
    out, w = qkv.attention(q, k, v, scale=0.25, normalize="none", need_weights=True)
    r_out, r_w, _ = ref.reference(q[None], k[None], v[None], scale=0.25, normalize="none")
    check(out, r_out[0], "out")
    check(w, r_w[0], "weights")
    # normalize="none" weights are the scaled scores themselves.
    np.testing.assert_allclose(w, 0.25 * q @ k.transpose(0, 2, 1), rtol=1e-12)


def test_a_query_with_no_key_gets_zero_not_nan():
    q = k = v = np.ones((1, 2, 3))
    mask = np.array([[True, True], [False, False]])
    out, w = qkv.attention(q, k, v, attn_mask=mask, need_weights=True)
    assert np.all(out[0, 1] == 0) and np.all(w[0, 1] == 0)
    np.testing.assert_allclose(out[0, 0], 1.0)


def test_nan_in_a_query_gives_nan_in_its_row_only():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 3, 4)) for _ in range(3))
    q[0, 1, 2] = np.nan
    out = qkv.attention(q, k, v)
    assert np.isnan(out[0, 1]).all()
    assert np.isfinite(out[0, [0, 2]]).all()


# ---- float32 --------------------------------------------------------------------------------

def naive_float32(q, k, v, visible):
    """The formula once more in plain float32 NumPy, one operation at a time; a row with no
    visible key gives 0 (docs/CONVENTIONS.md §1.4)."""
    s = np.einsum("bhld,bhsd->bhls", q, k) * np.float32(1 / math.sqrt(q.shape[-1]))
    s = np.where(visible, s, np.float32(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    e = np.where(visible, np.exp(s - np.where(np.isneginf(m), np.float32(0), m)), np.float32(0))
    total = e.sum(axis=-1, keepdims=True)
    return (e / np.where(total == 0, np.float32(1), total)) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,S", [(1, 300), (64, 64), (200, 130)])
def test_float32_within_twice_the_naive_float32_error(causal, L, S):
    """docs/CONVENTIONS.md §1.1: max|X − R| ≤ 2·max|N − R| + 1e-6, R the float64 reference of
    the same float32 inputs, N a naive float32 computation."""
    rng = np.random.default_rng(L * 1000 + S)
    q = rng.standard_normal((2, 4, L, 64)).astype(np.float32)
    k = rng.standard_normal((2, 4, S, 64)).astype(np.float32)
    v = rng.standard_normal((2, 4, S, 64)).astype(np.float32)
    out = qkv.attention(q, k, v, is_causal=causal, causal_alignment="bottom_right")
    assert out.dtype == np.float32
    r_out, _, _ = ref.reference(q, k, v, causal="bottom-right" if causal else None)
    visible = np.ones((L, S), bool)
    if causal:
        visible = np.arange(S)[None, :] <= np.arange(L)[:, None] + S - L
    bound = 2 * np.abs(naive_float32(q, k, v, visible) - r_out).max() + 1e-6
    err = np.abs(out - r_out).max()
    assert err <= bound, f"max |out − reference| {err:.3g} > {bound:.3g}"


# ---- PyTorch's goldens ----------------------------------------------------------------------

def sdpa_cases(golden_dir):
    import json
    import os
    data = np.load(os.path.join(golden_dir, "sdpa", "sdpa.npz"))
    meta = json.loads(str(data["meta"]))
    for name, args in meta.items():
        arrays = {key.split("/", 1)[1]: data[key] for key in data.files if key.startswith(name + "/")}
        yield name, arrays, args


def test_matches_pytorch_sdpa_goldens_forward_and_backward(golden_dir):
    """tests/golden/make_sdpa_goldens.py: torch.nn.functional.scaled_dot_product_attention in
    float64 (math backend) and its autograd gradients, on the same arguments."""
    n = 0
    for name, a, args in sdpa_cases(golden_dir):
        kwargs = dict(attn_mask=a.get("mask"), is_causal=args["is_causal"], scale=args["scale"],
                      enable_gqa=args["enable_gqa"])
        out = qkv.attention(a["q"], a["k"], a["v"], **kwargs)
        check(out, a["out"], f"{name}: out")
        g = qkv.attention_backward(a["grad_out"], a["q"], a["k"], a["v"], **kwargs)
        for key in ("dq", "dk", "dv"):
            check(getattr(g, key), a[key], f"{name}: {key}")
        # float32 inputs: within a float32 result's error of PyTorch's float64 output.
        q32, k32, v32 = (a[x].astype(np.float32) for x in ("q", "k", "v"))
        m32 = a.get("mask")
        if m32 is not None and m32.dtype != bool:
            m32 = m32.astype(np.float32)
        out32 = qkv.attention(q32, k32, v32, **dict(kwargs, attn_mask=m32))
        assert out32.dtype == np.float32
        np.testing.assert_allclose(out32, a["out"], atol=2e-6, rtol=1e-5, err_msg=name)
        n += 1
    assert n == 13


def test_the_golden_check_rejects_a_perturbed_result(golden_dir):
    name, a, args = next(sdpa_cases(golden_dir))
    out = qkv.attention(a["q"], a["k"], a["v"], is_causal=args["is_causal"])
    out.flat[7] += 1e-7 * abs(out.flat[7]) + 1e-9
    assert not ref.compare(out, a["out"])[0]


# ---- backward against finite differences ----------------------------------------------------

def numeric_grads(f, arrays, eps=1e-6):
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            keep = a[i]
            a[i] = keep + eps
            up = f()
            a[i] = keep - eps
            down = f()
            a[i] = keep
            g[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("case", ["plain", "causal_gqa", "float_mask"])
def test_backward_matches_finite_differences(score, case):
    rng = np.random.default_rng(hash((score, case)) % 2**32)
    hq, hkv = (4, 2) if case == "causal_gqa" else (2, 2)
    L, S, D = 3, 4, 3
    q = rng.standard_normal((1, hq, L, D))
    k = rng.standard_normal((1, hkv, S, D))
    v = rng.standard_normal((1, hkv, S, 2))
    _, params = params_for(rng, score, D, D)
    kwargs = dict(score=score, params=params, enable_gqa=hq != hkv)
    if case == "causal_gqa":
        kwargs.update(is_causal=True, causal_alignment="bottom_right")
    if case == "float_mask":
        kwargs["attn_mask"] = rng.standard_normal((L, S))
    dout = rng.standard_normal((1, hq, L, 2))
    loss = lambda: float((qkv.attention(q, k, v, **kwargs) * dout).sum())
    g = qkv.attention_backward(dout, q, k, v, **kwargs)
    inputs = [q, k, v] + list(params.values())
    numeric = numeric_grads(loss, inputs)
    analytic = [g.dq, g.dk, g.dv] + [g.dparams[name] for name in params]
    for name, x, y in zip(["dq", "dk", "dv"] + list(params), analytic, numeric):
        # Central differences with step 1e-6 in float64: truncation ~1e-12·f''' and rounding
        # ~1e-16/1e-6 = 1e-10 per entry; 1e-7 relative to the largest entry leaves a margin.
        scale = max(np.abs(y).max(), 1e-3)
        assert np.abs(x - y).max() <= 1e-7 * scale, f"{score} {case} {name}"


def test_backward_rejects_a_wrong_gradient():
    """The finite-difference check above fails for a gradient off by a small amount."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 1, 3, 2)) for _ in range(3))
    dout = rng.standard_normal((1, 1, 3, 2))
    g = qkv.attention_backward(dout, q, k, v)
    numeric = numeric_grads(lambda: float((qkv.attention(q, k, v) * dout).sum()), [q])[0]
    assert np.abs(g.dq - numeric).max() <= 1e-7 * np.abs(numeric).max()
    wrong = g.dq.copy()
    wrong[0, 0, 1, 1] *= 1.001
    assert np.abs(wrong - numeric).max() > 1e-7 * np.abs(numeric).max()


def test_backward_from_the_saved_forward_is_the_same_bits():
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 4, 33, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 40, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 40, 8)).astype(np.float32)
    dout = rng.standard_normal((2, 4, 33, 8)).astype(np.float32)
    kw = dict(is_causal=True, causal_alignment="bottom_right", enable_gqa=True)
    out, saved = qkv.attention(q, k, v, keep_for_backward=True, **kw)
    assert isinstance(saved, qkv.SavedForward) and saved.max.shape == (2, 4, 33)
    np.testing.assert_array_equal(out, qkv.attention(q, k, v, **kw))
    again = qkv.attention_backward(dout, q, k, v, **kw)
    kept = qkv.attention_backward(dout, q, k, v, saved=saved, **kw)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(again, name), err_msg=name)
    # float64 runs the reference path: nothing saved, and the backward runs the forward again.
    out64, saved64 = qkv.attention(q.astype(np.float64), k.astype(np.float64),
                                   v.astype(np.float64), keep_for_backward=True, **kw)
    assert saved64.max is None and saved64.sum is None
    with pytest.raises(ValueError, match=r"computed from another query: float32 \[2, 4, 33, 16\], "
                                         r"not float32 \[2, 4, 5, 16\]"):
        qkv.attention_backward(dout[:, :, :5], q[:, :, :5], k, v, saved=saved, **kw)
    with pytest.raises(TypeError, match="saved: tuple; expected the SavedForward"):
        qkv.attention_backward(dout, q, k, v, saved=(out, None, None), **kw)


def test_changing_the_returned_output_does_not_change_the_saved_forward():
    # out was saved.out: `out *= 2` after the forward made the backward read the doubled output
    # and return a dq off by 0.71 without a word (issue 26's last sweep). The saved arrays are
    # a read-only copy.
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((1, 2, 9, 8)).astype(np.float32) for _ in range(3))
    dout = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    out, saved = qkv.attention(q, k, v, keep_for_backward=True)
    out *= 2
    assert not np.shares_memory(out, saved.out)
    assert not saved.out.flags.writeable and not saved.max.flags.writeable
    with pytest.raises(ValueError):
        saved.out[0, 0, 0, 0] = 1.0
    kept = qkv.attention_backward(dout, q, k, v, saved=saved)
    again = qkv.attention_backward(dout, q, k, v)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(again, name), err_msg=name)


def test_a_saved_forward_of_other_inputs_or_options_is_refused():
    # Issue 26: the saved softmax of another forward (other values in arrays of the same shapes,
    # or another is_causal, scale, mask or score) gave wrong gradients without a word.
    rng = np.random.default_rng(12)
    q, k, v, dout = (rng.standard_normal((2, 3, 9, 8)).astype(np.float32) for _ in range(4))
    out, saved = qkv.attention(q, k, v, keep_for_backward=True)
    right = qkv.attention_backward(dout, q, k, v)
    np.testing.assert_array_equal(qkv.attention_backward(dout, q, k, v, saved=saved).dq, right.dq)
    expected = "; expected the forward of these very inputs and options"

    def refused(why, *args, **kwargs):
        with pytest.raises(ValueError) as e:
            qkv.attention_backward(dout, *args, **kwargs)
        assert str(e.value) == f"attention_backward: the saved forward was computed {why}" \
                               f"{expected}"

    k2 = k.copy()
    k2[1, 2, 3, 4] += 0.25
    refused("from another key: the same float32 [2, 3, 9, 8] but other values", q, k2, v,
            saved=saved)
    refused("from another value: the same float32 [2, 3, 9, 8] but other values", q, k, k,
            saved=saved)
    # The same array, changed in place after the forward, is another input.
    q_in_place = q.copy()
    _, saved_in_place = qkv.attention(q_in_place, k, v, keep_for_backward=True)
    q_in_place[0, 0, 0, 0] = 3.0
    refused("from another query: the same float32 [2, 3, 9, 8] but other values", q_in_place,
            k, v, saved=saved_in_place)
    refused("with causal none, not top-left", q, k, v, is_causal=True, saved=saved)
    refused("with scale 0.353553, not 0.5", q, k, v, scale=0.5, saved=saved)
    refused("with score scaled-dot, not dot", q, k, v, score="dot", saved=saved)
    refused("without a mask, not with one", q, k, v, attn_mask=np.ones((9, 9), bool),
            saved=saved)
    _, causal = qkv.attention(q, k, v, is_causal=True, keep_for_backward=True)
    refused("with causal top-left, not bottom-right", q, k, v, is_causal=True,
            causal_alignment="bottom_right", saved=causal)
    # float64 takes the reference path, which saves no softmax; its forward is checked alike.
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    _, saved64 = qkv.attention(q64, k64, v64, score="laplace", keep_for_backward=True)
    refused("with score laplace, not cosine", q64, k64, v64, score="cosine", saved=saved64)
    refused("from another query: float64 [2, 3, 9, 8], not float32 [2, 3, 9, 8]", q, k, v,
            score="laplace", saved=saved64)


def test_backward_shapes_and_dscale():
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, 6, 3)).astype(np.float32)
    g = qkv.attention_backward(np.ones((2, 4, 5, 3), np.float32), q, k, v, enable_gqa=True)
    assert (g.dq.shape, g.dk.shape, g.dv.shape) == (q.shape, k.shape, v.shape)
    assert g.dq.dtype == np.float32 and isinstance(g.dscale, float) and g.dparams == {}


# ---- arrays read in place -------------------------------------------------------------------

def test_contiguous_and_strided_arrays_are_read_without_a_copy():
    from qkv import _qkv
    a = np.zeros((2, 3, 5, 4), np.float32)
    address, shape, strides = _qkv._view_of(a)
    assert address == a.ctypes.data and shape == [2, 3, 5, 4] and strides == [60, 20, 4, 1]
    t = a.transpose(0, 2, 1, 3)  # PyTorch's (N, L, H, E) → (N, H, L, E) habit
    address, shape, strides = _qkv._view_of(t)
    assert address == a.ctypes.data and shape == [2, 5, 3, 4] and strides == [60, 4, 20, 1]
    s = a[:, :, 1:4]  # a slice starts inside the buffer
    assert _qkv._view_of(s)[0] == a.ctypes.data + 4 * 4


def test_a_strided_view_gives_the_same_result_as_a_copy():
    rng = np.random.default_rng(7)
    big = rng.standard_normal((2, 9, 4, 16)).astype(np.float32)  # (N, L, H, E)
    q = big.transpose(0, 2, 1, 3)[:, :, :, ::2]  # every other feature: strides 2 elements
    k = big.transpose(0, 2, 1, 3)[:, :, ::-1, 1::2]  # reversed: a negative stride, copied once
    out = qkv.attention(q, k, q)
    expected = qkv.attention(np.ascontiguousarray(q), np.ascontiguousarray(k),
                             np.ascontiguousarray(q))
    np.testing.assert_array_equal(out, expected)


def test_lists_and_scalars_arrays_of_other_libraries_are_accepted():
    out = qkv.attention([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[10.0], [20.0]])
    np.testing.assert_allclose(out, [[10 * 0.6697615493266569 + 20 * 0.3302384506733431]],
                               rtol=1e-12)


def test_results_own_their_memory_and_outlive_the_call():
    rng = np.random.default_rng(8)
    q = rng.standard_normal((3, 4)).astype(np.float32)
    out = qkv.attention(q, q, q)
    del q
    import gc
    gc.collect()
    assert out.flags.writeable and np.isfinite(out).all()
    out[...] = 0  # ours to change


# ---- empty sizes (include/qkv/attention.h): a valid problem, never an error (issue 26) --------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_empty_sizes_give_what_the_contract_says(dtype):
    """No queries: an empty output (as PyTorch's SDPA). No keys: every query has nothing to attend
    to, output 0 (SDPA: NaN). Head dim 0: every score 0, so the weights are even and the output
    is the mean of the values. Gradients alike. (float64 arrays of no elements were refused: the
    view of nothing pointed at a float, not aligned for float64.)"""
    def ones(*shape):
        return np.ones(shape, dtype)

    out, w = qkv.attention(ones(0, 4), ones(5, 4), ones(5, 3), need_weights=True)
    assert (out.shape, w.shape, out.dtype) == ((0, 3), (0, 5), dtype)
    out = qkv.attention(ones(0, 2, 3, 4), ones(0, 2, 5, 4), ones(0, 2, 5, 3))  # no batch
    assert out.shape == (0, 2, 3, 3)
    out, w = qkv.attention(ones(3, 4), ones(0, 4), ones(0, 3), need_weights=True, is_causal=True,
                           causal_alignment="bottom_right")
    np.testing.assert_array_equal(out, np.zeros((3, 3)))
    assert w.shape == (3, 0)
    values = np.arange(15, dtype=dtype).reshape(5, 3)
    out, w = qkv.attention(ones(3, 0), ones(5, 0), values, need_weights=True)
    np.testing.assert_allclose(w, np.full((3, 5), 0.2), rtol=1e-6)
    np.testing.assert_allclose(out, np.tile([6.0, 7.0, 8.0], (3, 1)), rtol=1e-6)  # mean rows
    assert qkv.attention(ones(3, 4), ones(5, 4), ones(5, 0)).shape == (3, 0)
    # Masks and parameters of no elements.
    out = qkv.attention(ones(0, 4), ones(5, 4), ones(5, 3), attn_mask=np.zeros((0, 5), dtype))
    assert out.shape == (0, 3)
    out = qkv.attention(ones(0, 4), ones(5, 4), ones(5, 3), attn_mask=np.ones((0, 5), bool))
    assert out.shape == (0, 3)
    additive = {"w_q": ones(0, 4), "w_k": ones(0, 4), "v": ones(0)}  # A = 0: every score 0
    out = qkv.attention(ones(2, 4), ones(5, 4), values, score="additive", params=additive)
    np.testing.assert_allclose(out, np.tile([6.0, 7.0, 8.0], (2, 1)), rtol=1e-6)

    g = qkv.attention_backward(ones(0, 3), ones(0, 4), ones(5, 4), ones(5, 3))
    assert g.dq.shape == (0, 4) and g.dscale == 0
    np.testing.assert_array_equal(g.dk, np.zeros((5, 4)))  # no query saw them
    np.testing.assert_array_equal(g.dv, np.zeros((5, 3)))
    g = qkv.attention_backward(ones(3, 3), ones(3, 4), ones(0, 4), ones(0, 3))
    np.testing.assert_array_equal(g.dq, np.zeros((3, 4)))
    assert g.dk.shape == (0, 4) and g.dv.shape == (0, 3)
    # Head dim 0: dv_j = Σ_i w_ij·dout_i = 3 queries × 0.2 × 1.
    g = qkv.attention_backward(ones(3, 3), ones(3, 0), ones(5, 0), values)
    assert g.dq.shape == (3, 0) and g.dk.shape == (5, 0)
    np.testing.assert_allclose(g.dv, np.full((5, 3), 0.6), rtol=1e-6)
    # A saved forward of nothing is the forward of nothing.
    out, saved = qkv.attention(ones(0, 4), ones(5, 4), ones(5, 3), keep_for_backward=True)
    g = qkv.attention_backward(ones(0, 3), ones(0, 4), ones(5, 4), ones(5, 3), saved=saved)
    assert g.dq.shape == (0, 4)


# ---- memory: the estimate against memory_limit, before the work (issue 26) ------------------

_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def memory_refusal(call):
    """The one-line MemoryError of call(), and the estimate it names, in bytes."""
    with pytest.raises(MemoryError) as e:
        call()
    message = str(e.value)
    assert "\n" not in message and "bad_alloc" not in message, message
    found = re.search(r"needs about ([0-9.,]+) (bytes|KiB|MiB|GiB|TiB) of memory, over the limit "
                      r"of [0-9.,]+ (bytes|KiB|MiB|GiB|TiB) \(memory_limit\)", message)
    assert found, message
    return message, float(found.group(1).replace(",", "")) * _UNITS[found.group(2)]


def test_attention_says_what_it_needs_and_refuses_past_memory_limit():
    """The sweep's (1, 16, 8192, 64) float32 with need_weights: 16·8192² = 2^30 weights, each a
    float64 and its float32 copy (12 bytes): 12 GiB beyond the inputs, refused before the work
    with both sizes, where it was MemoryError "std::bad_alloc" after allocating."""
    q = np.zeros((1, 16, 8192, 64), np.float32)
    message, need = memory_refusal(
        lambda: qkv.attention(q, q, q, need_weights=True, memory_limit=2**30))
    assert message.startswith("attention of a query float32 [1, 16, 8192, 64] over 8,192 keys "
                              "with need_weights (every query's weight on every key) needs about ")
    assert "over the limit of 1.0 GiB (memory_limit); expected need_weights=False" in message
    assert 12 * 2**30 <= need < 12.5 * 2**30, need
    # The fused path of the same inputs needs no L×S memory: within a limit of 1 GiB (a smaller
    # case, to keep the test quick), and its weights are refused under that limit.
    small = np.random.default_rng(12).standard_normal((1, 4, 2048, 16)).astype(np.float32)
    out = qkv.attention(small, small, small, memory_limit=64 * 2**20)
    assert out.shape == small.shape and np.isfinite(out).all()
    _, need = memory_refusal(lambda: qkv.attention(small, small, small, need_weights=True,
                                                   memory_limit=64 * 2**20))
    assert need >= 12 * 4 * 2048**2
    # The backward too (float64: the reference path, whose causal mask is an L×S bias).
    message, _ = memory_refusal(lambda: qkv.attention_backward(
        small.astype(np.float64), *[small.astype(np.float64)] * 3, is_causal=True,
        memory_limit=2**20))
    assert message.startswith("attention_backward of a query float64 [1, 4, 2048, 16] over 2,048 "
                              "keys needs about ")
    with pytest.raises(ValueError, match="memory_limit 0 is out of range; expected 1 to 2"):
        qkv.attention(small, small, small, memory_limit=0)
    with pytest.raises(TypeError, match="memory_limit: str; expected an int"):
        qkv.attention_backward(small, small, small, small, memory_limit="1G")


_PEAK = """
import sys
import numpy as np, qkv
def peak():  # this process's peak resident memory, bytes (ru_maxrss would start at the parent's)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
rng = np.random.default_rng(0)
kind = sys.argv[1]
dtype = np.float64 if kind == "float64_backward" else np.float32
q, k, v = (rng.standard_normal((1, 8, 1024, 64)).astype(dtype) for _ in range(3))
def call(limit):
    if kind == "float64_backward":
        return qkv.attention_backward(q, q, k, v, is_causal=True, memory_limit=limit)
    return qkv.attention(q, k, v, need_weights=kind == "weights", memory_limit=limit)
try:
    call(1)
except MemoryError as e:
    print(str(e))
qkv.attention(q[:, :, :8], k[:, :, :8], v[:, :, :8])  # the thread pool, OpenBLAS: started
before = peak()
result = call(None)
print(peak() - before)
"""


@pytest.mark.parametrize("kind", ["weights", "fused", "float64_backward"])
def test_the_estimate_covers_the_measured_peak_and_not_by_much(kind):
    """memory.h: an estimate errs high, never low by much. A fresh interpreter's peak resident
    memory (VmHWM: its own, where ru_maxrss would start at the parent's, pytest's) grows by
    what one call allocates beyond its inputs: with need_weights (8 heads of
    1024², 12 bytes a weight: 96 MiB), on the fused path (a few MiB), and in a float64 causal
    backward (the mask's float64 bias, 64 MiB)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _PEAK, kind], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    refusal, growth = r.stdout.strip().splitlines()
    found = re.search(r"needs about ([0-9.]+) (bytes|KiB|MiB|GiB)", refusal)
    need = float(found.group(1)) * _UNITS[found.group(2)]
    growth = float(growth)
    # bytes_str's two or three digits: 5% either way.
    assert need * 1.05 >= growth, (
        f"{kind}: estimated {need / 2**20:.1f} MiB, grew {growth / 2**20:.1f}")
    assert need <= 1.5 * growth + 16 * 2**20, (
        f"{kind}: estimated {need / 2**20:.1f} MiB, grew {growth / 2**20:.1f}")


# ---- bad arguments --------------------------------------------------------------------------

def raises(exc, match, *args, **kwargs):
    with pytest.raises(exc, match=match):
        qkv.attention(*args, **kwargs)


def test_bad_arguments_raise_one_line_errors():
    q = np.zeros((2, 3, 4))
    raises(TypeError, r"query: int64 array; expected float32 or float64",
           np.zeros((2, 3, 4), np.int64), q, q)
    raises(TypeError, r"query, key and value have dtypes float32, float64, float64",
           q.astype(np.float32), q, q)
    raises(ValueError, r"query: 1 dimensions", np.zeros(4), q, q)
    raises(ValueError, r"query: 5 dimensions", np.zeros((1, 1, 2, 3, 4)), q, q)
    raises(ValueError, r"key.*\[2, 3, 5\]", q, np.zeros((2, 3, 5)), np.zeros((2, 3, 5)))
    raises(ValueError, r"query has 4 heads, key 2; pass enable_gqa=True",
           np.zeros((4, 3, 4)), np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    raises(ValueError, r"attn_mask and is_causal=True together", q, q, q,
           attn_mask=np.ones((3, 3), bool), is_causal=True)
    raises(TypeError, r"attn_mask: float32; expected bool or the query's float64", q, q, q,
           attn_mask=np.zeros((3, 3), np.float32))
    raises(ValueError, r"attn_mask", q, q, q, attn_mask=np.ones((4, 3), bool))
    raises(ValueError, r"score 'softmax'; expected one of scaled_dot", q, q, q, score="softmax")
    raises(ValueError, r"causal_alignment 'bottom'", q, q, q, is_causal=True,
           causal_alignment="bottom")
    raises(ValueError, r"params\['w'\]", q, q, q, score="general")
    raises(ValueError, r"params: 'W'", q, q, q, score="general", params={"W": np.eye(4)})
    # Params a score does not read were ignored (issue 26's last sweep); the command refuses them.
    raises(ValueError, r"params w given, but score laplace has no parameters", q, q, q,
           score="laplace", params={"w": np.eye(4)})
    raises(ValueError, r"params w given, but score additive reads only v, w_k, w_q", q, q, q,
           score="additive", params={"w": np.eye(4), "w_q": np.eye(4), "w_k": np.eye(4),
                                     "v": np.ones(4)})
    raises(ValueError, r"scale", q, q, q, scale=float("inf"))
    for message in ("query: int64 array; expected float32 or float64",):
        assert "\n" not in message


def test_an_unaligned_array_is_copied_not_refused():
    # np.frombuffer at an odd offset is contiguous but not aligned: ascontiguousarray kept it,
    # and the error named qkv's internal Tensor::borrow (issue 26's last sweep).
    raw = np.arange(8, dtype=np.float32).tobytes()
    odd = np.frombuffer(b"x" + raw, dtype=np.float32, offset=1).reshape(2, 4)
    assert odd.ctypes.data % 4 != 0
    aligned = np.frombuffer(raw, dtype=np.float32).reshape(2, 4)
    assert np.array_equal(qkv.attention(odd, odd, odd), qkv.attention(aligned, aligned, aligned))


def test_overflow_is_nan_not_a_silent_number():
    q = np.full((1, 2, 2), 1e200)  # q·k = 2e400: beyond float64
    out = qkv.attention(q, q, q)
    assert np.isnan(out).all()


# ---- the GIL --------------------------------------------------------------------------------

def test_the_gil_is_released_while_the_kernels_run():
    """While one thread is inside qkv.attention (the float64 reference path: slow, ~0.1 s), a
    second keeps running Python (conftest.python_runs_during)."""
    q = np.random.default_rng(9).standard_normal((1, 4, 384, 64))
    notes, seconds = python_runs_during(lambda: qkv.attention(q, q, q, path="reference"))
    assert seconds > 0.03, f"the call took {seconds:.3f} s: too short to tell"
    # A loop of 1,000 iterations takes well under a millisecond: free, the counter notes the
    # time dozens of times in that span; blocked by a held GIL, not once.
    assert notes >= 10, f"{notes} notes in a call of {seconds:.3f} s"


def test_two_threads_compute_at_once_with_correct_results():
    rng = np.random.default_rng(10)
    qs = [rng.standard_normal((2, 64, 32)) for _ in range(4)]
    expected = [qkv.attention(q, q, q, is_causal=True) for q in qs]
    results = [None] * 4

    def work(i):
        results[i] = qkv.attention(qs[i], qs[i], qs[i], is_causal=True)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, e in zip(results, expected):
        np.testing.assert_array_equal(r, e)


# ---- the command ----------------------------------------------------------------------------

def test_python_dash_m_qkv_runs_the_command():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "qkv", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("qkv "), r
    r = subprocess.run([sys.executable, "-m", "qkv", "attend", "--bogus"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "--bogus" in r.stderr


def test_docstring_examples_run():
    import doctest
    import qkv._attention
    failures, tried = doctest.testmod(qkv._attention)[:2]
    assert tried >= 4 and failures == 0
    failures, tried = doctest.testmod(qkv)[:2]
    assert tried >= 2 and failures == 0
