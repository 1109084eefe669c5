"""What the values carried, recomputed with NumPy from `qkv explain --json` alone (issue 28):
value-weighted attention (Kobayashi et al. 2020, "Attention is not only a weight"), the
residual-and-norm mixing (Kobayashi et al. 2021), attention rollout (Abnar & Zuidema 2020) and the
rollout of the mixing, on SmolLM2-135M (pre-norm, grouped-query heads, no biases) and
all-MiniLM-L6-v2 (post-LN, biases). Each is written from the papers' formulas, in float64,
from the JSON's v, weights and (with --layer) W_O, the LayerNorm's gain and the stream the layer
reads; none of it from qkv.

The recomputations and the checker (relative error 1e-9) are in values_numpy.py, shared with
test_values_arrays.py; the last test shows one number moved by 1e-7 of its scale fails."""
import json
import subprocess
import sys

import numpy as np
import pytest

from values_numpy import (check, mixing, perturbed, residual_averaged, rollout, sink_numbers,
                          value_norms, value_weighted)

SMOL_TEXT = "The capital of France is"
MINI_TEXT = "The animal didn't cross the street because it was too tired"


def explain_json(*args):
    r = subprocess.run([sys.executable, "-m", "qkv", "explain", *args, "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


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
    check(np.array(L["weights"]) * np.array(L["ov_norms"])[:, None, :], value_weighted(L),
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
        at = full["layers"][s["layer"]]
        check([s["weight"], s["first_norm"], s["others_norm"], s["value_share"], s["moved"]],
              sink_numbers(at["weights"][s["head"]], at["ov_norms"][s["head"]]),
              f"{name}: sink L{s['layer']}h{s['head']}")


def test_each_checker_rejects_a_perturbed_result(case):
    name, full, one, layer, _ = case
    L = one["layers"][0]
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
