"""What the values carried, recomputed with NumPy from `qkv explain --json` alone (issue 28):
value-weighted attention (Kobayashi et al. 2020, "Attention is not only a weight"), the
residual-and-norm mixing (Kobayashi et al. 2021), attention rollout (Abnar & Zuidema 2020) and the
rollout of the mixing, on SmolLM2-135M (pre-norm, grouped-query heads, no biases) and
all-MiniLM-L6-v2 (post-LN, biases). Each is written here from the papers' formulas, in float64,
from the JSON's v, weights and (with --layer) W_O, the LayerNorm's gain and the stream the layer
reads; none of it from qkv.

Tolerance: qkv computes in float64 from the same float32 numbers the JSON prints exactly (17
digits), in another order; docs/CONVENTIONS.md §1.2 allows NumPy checks a relative error of 1e-9,
far above the ~1e-15 they differ by and far below what a dropped head or residual makes (the
last test shows one number moved by 1e-7 of its scale fails)."""
import json
import subprocess
import sys

import numpy as np
import pytest

RELATIVE = 1e-9
SMOL_TEXT = "The capital of France is"
MINI_TEXT = "The animal didn't cross the street because it was too tired"


def explain_json(*args):
    r = subprocess.run([sys.executable, "-m", "qkv", "explain", *args, "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check(got, want, what):
    """The checker: max |got − want| ≤ 1e-9·max(1, max |want|)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    worst = np.max(np.abs(got - want))
    bound = RELATIVE * max(1.0, np.max(np.abs(want)))
    assert worst <= bound, f"{what}: max |Δ| {worst:.3e} > {bound:.3e}"


def written(layer):
    """f^h(x_j) = W_O^h v^h_j [H, m, hidden]: W_O [hidden, H·d], its columns h·d … h·d + d − 1
    taking head h; v [H, m, d] as captured (BERT's bias b_V included)."""
    w_o, v = np.array(layer["w_o"]), np.array(layer["v"])
    heads, _, d = v.shape
    return np.einsum("rhk,hjk->hjr", w_o.reshape(w_o.shape[0], heads, d), v)


def value_norms(layer):
    return np.linalg.norm(written(layer), axis=2)


def mixing(layer):
    """Kobayashi et al. 2021: c_ij = [i = j]·x_i + Σ_h α^h_ij f^h(x_j); post-LN (a gain given),
    each part centred and multiplied by γ (the 1/σ_i of the whole sum is common to the row);
    each row's ‖c_ij‖ / Σ_k ‖c_ik‖."""
    f, alpha, x = written(layer), np.array(layer["weights"]), np.array(layer["stream_in"])
    n = x.shape[0]
    parts = np.einsum("hij,hjr->ijr", alpha, f) + np.eye(n)[:, :, None] * x[:, None, :]
    if layer["mixing_gain"] is not None:
        parts = (parts - parts.mean(axis=2, keepdims=True)) * np.array(layer["mixing_gain"])
    norms = np.linalg.norm(parts, axis=2)
    return norms / norms.sum(axis=1, keepdims=True)


def rollout(steps):
    out, r = [], np.eye(steps[0].shape[0])
    for a in steps:
        r = a @ r
        out.append(r)
    return out


def residual_averaged(weights):
    """Abnar & Zuidema 2020: ½·mean_h A + ½·I, rows renormalised."""
    a = 0.5 * np.array(weights).mean(axis=0) + 0.5 * np.eye(len(weights[0]))
    return a / a.sum(axis=1, keepdims=True)


CASES = {"smollm2": (["--model", "smollm2", SMOL_TEXT], 14, "pre-norm"),
         "minilm": ([MINI_TEXT], 2, "post-LN")}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    args, layer, norm = CASES[request.param]
    full = explain_json(*args)
    one = explain_json(*args, "--layer", str(layer), "--head", "0")
    return request.param, full, one, layer, norm


def test_value_weighted_norms_are_the_written_vectors_norms(case):
    name, full, one, layer, norm = case
    assert full["values"]["norm"] == norm and full["values"]["mixing_max_tokens"] == 512
    L = one["layers"][0]
    assert L["layer"] == layer and len(one["layers"]) == 1
    norms = value_norms(L)
    check(L["ov_norms"], norms, f"{name} layer {layer}: ‖W_O^h v^h_j‖")
    check(full["layers"][layer]["ov_norms"], norms, f"{name}: the full document's norms")
    # The value-weighted matrix ‖α^h_ij f^h(x_j)‖ = α^h_ij·‖f^h(x_j)‖ (the norm of the product).
    product = np.linalg.norm(np.array(L["weights"])[..., None] * written(L)[:, None, :, :], axis=3)
    check(np.array(L["weights"]) * np.array(L["ov_norms"])[:, None, :], product,
          f"{name}: weights × ov_norms")


def test_mixing_is_each_sources_norm_share(case):
    name, full, one, layer, _ = case
    L = one["layers"][0]
    # The stream the layer reads is the previous layer's output (the decoder's rebuilt by qkv).
    check(L["stream_in"], full["layers"][layer - 1]["hidden"], f"{name}: stream_in")
    want = mixing(L)
    check(L["mixing"], want, f"{name} layer {layer}: mixing")
    check(np.array(L["mixing"]).sum(axis=1), np.ones(len(want)), f"{name}: rows sum to 1")
    if full.get("causal"):
        assert np.all(np.triu(np.array(L["mixing"]), 1) == 0), "a later token is no source"


def test_rollouts_are_the_products_over_the_layers(case):
    name, full, _, _, _ = case
    layers = full["layers"]
    want = rollout([residual_averaged(layer["weights"]) for layer in layers])
    for l, layer in enumerate(layers):
        check(layer["rollout"], want[l], f"{name}: rollout after layer {l}")
    want = rollout([np.array(layer["mixing"]) for layer in layers])
    for l, layer in enumerate(layers):
        check(layer["mixing_rollout"], want[l], f"{name}: mixing rollout after layer {l}")


def test_sinks_are_explained_with_their_value_norms(case):
    name, full, _, _, _ = case
    sinks = full["values"]["sinks"]
    assert sinks, f"{name}: the text has attention sinks"
    for s in sinks[:10]:
        w = np.array(full["layers"][s["layer"]]["weights"][s["head"]])
        f = np.array(full["layers"][s["layer"]]["ov_norms"][s["head"]])
        moved = w[1:] * f  # queries i ≥ 1
        check([s["weight"], s["first_norm"], s["others_norm"], s["value_share"], s["moved"]],
              [w[1:, 0].mean(), f[0], f[1:].mean(), (moved[:, 0] / moved.sum(axis=1)).mean(),
               moved.sum(axis=1).mean()], f"{name}: sink L{s['layer']}h{s['head']}")


def test_each_checker_rejects_a_perturbed_result(case):
    name, full, one, layer, _ = case
    L = one["layers"][0]

    def perturbed(x):
        x = np.array(x, dtype=np.float64)
        x.flat[x.size // 2] += 1e-7 * max(1.0, np.max(np.abs(x)))
        return x

    with pytest.raises(AssertionError):
        check(perturbed(L["ov_norms"]), value_norms(L), "norms")
    with pytest.raises(AssertionError):
        check(perturbed(L["mixing"]), mixing(L), "mixing")
    want = rollout([residual_averaged(x["weights"]) for x in full["layers"]])
    with pytest.raises(AssertionError):
        check(perturbed(full["layers"][-1]["rollout"]), want[-1], "rollout")
    # A mixing without the residual, or without the LayerNorm, is far from qkv's.
    no_residual = dict(L, stream_in=np.zeros_like(np.array(L["stream_in"])).tolist())
    with pytest.raises(AssertionError):
        check(L["mixing"], mixing(no_residual), "mixing without the residual")
