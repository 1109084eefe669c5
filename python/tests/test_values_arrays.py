"""Explanation's arrays of what the values carried (issue 28): value_norms, value_weighted,
mixing, rollout, mixing_rollout and sinks, on SmolLM2-135M (pre-norm, grouped-query heads) and
all-MiniLM-L6-v2 (post-LN, biases), each checked in every layer against a float64 NumPy
recomputation (values_numpy.py, from the papers' formulas) from Explanation.json() alone: its
q/k/v-derived weights, v, and per layer (json(layer=l)) W_O, the LayerNorm's gain and the stream
the layer reads. The last tests show each checker rejects an array with one number moved by 1e-7
of its scale, and what a run past 512 tokens gives (None)."""
import json

import numpy as np
import pytest

import qkv
import tiny_gguf
from values_numpy import (check, mixing, perturbed, residual_averaged, rollout, sink_numbers,
                          value_norms, value_weighted)

SMOL_TEXT = "The capital of France is"
MINI_TEXT = "The animal didn't cross the street because it was too tired"


def _smollm2():
    return qkv.CausalLM().explain(SMOL_TEXT)


def _minilm():
    return qkv.Model().explain(MINI_TEXT)


@pytest.fixture(scope="module", params=["minilm", "smollm2"])
def case(request):
    """(name, the Explanation, its full JSON, every layer's one-layer JSON)."""
    x = {"minilm": _minilm, "smollm2": _smollm2}[request.param]()
    full = json.loads(x.json())
    one = [json.loads(x.json(layer=l))["layers"][0] for l in range(x.layers)]
    return request.param, x, full, one


def test_arrays_have_their_shapes_and_are_read_only(case):
    _, x, _, _ = case
    n, L, H = len(x.tokens), x.layers, x.heads
    for name, shape in (("value_norms", (L, H, n)), ("value_weighted", (L, H, n, n)),
                        ("mixing", (L, n, n)), ("rollout", (L, n, n)),
                        ("mixing_rollout", (L, n, n))):
        a = getattr(x, name)
        assert a.shape == shape and a.dtype == np.float64, name
        assert not a.flags.writeable, f"{name}: a record of the run, read-only"
    with pytest.raises(ValueError, match=f"layer {L} is out of range; this model has layers"):
        x.json(layer=L)


def test_value_norms_are_the_written_vectors_norms(case):
    name, x, _, one = case
    for l, layer in enumerate(one):
        assert layer["layer"] == l
        check(x.value_norms[l], value_norms(layer), f"{name} layer {l}: ‖W_O^h v^h_j‖")


def test_value_weighted_is_the_norm_of_each_weighted_vector(case):
    name, x, _, one = case
    for l, layer in enumerate(one):
        check(x.value_weighted[l], value_weighted(layer), f"{name} layer {l}: ‖α f(x_j)‖")


def test_mixing_is_each_sources_norm_share(case):
    name, x, _, one = case
    for l, layer in enumerate(one):
        check(x.mixing[l], mixing(layer), f"{name} layer {l}: mixing")
    check(x.mixing.sum(axis=2), np.ones(x.mixing.shape[:2]), f"{name}: rows sum to 1")
    if x.causal:
        assert np.all(np.triu(x.mixing, 1) == 0), "a later token is no source"


def test_rollouts_are_the_products_over_the_layers(case):
    name, x, full, one = case
    want = rollout([residual_averaged(layer["weights"]) for layer in full["layers"]])
    check(x.rollout, np.stack(want), f"{name}: rollout")
    want = rollout([mixing(layer) for layer in one])
    check(x.mixing_rollout, np.stack(want), f"{name}: mixing rollout")


def test_sinks_are_the_heads_mostly_on_token_0_with_their_value_norms(case):
    name, x, full, one = case
    # The heads whose mean weight on token 0 over queries i ≥ 1 is above one half, largest first.
    means = [(np.array(layer["weights"])[h, 1:, 0].mean(), l, h)
             for l, layer in enumerate(full["layers"]) for h in range(x.heads)]
    want = sorted((m for m in means if m[0] > 0.5), reverse=True)
    assert want and [(s.layer, s.head) for s in x.sinks] == [(l, h) for _, l, h in want]
    for s in x.sinks:
        layer = one[s.layer]
        check([s.weight, s.first_norm, s.others_norm, s.value_share, s.moved],
              sink_numbers(layer["weights"][s.head], value_norms(layer)[s.head]),
              f"{name}: sink L{s.layer}h{s.head}")


def test_each_checker_rejects_a_perturbed_array(case):
    _, x, full, one = case
    last = len(one) - 1
    with pytest.raises(AssertionError):
        check(perturbed(x.value_norms[last]), value_norms(one[last]), "norms")
    with pytest.raises(AssertionError):
        check(perturbed(x.value_weighted[last]), value_weighted(one[last]), "value-weighted")
    with pytest.raises(AssertionError):
        check(perturbed(x.mixing[last]), mixing(one[last]), "mixing")
    want = np.stack(rollout([residual_averaged(layer["weights"]) for layer in full["layers"]]))
    with pytest.raises(AssertionError):
        check(perturbed(x.rollout), want, "rollout")
    # Value-weighted attention is not the weights alone, nor the mixing without its residual.
    with pytest.raises(AssertionError):
        check(x.value_weighted[last], np.array(one[last]["weights"]), "weights")
    no_residual = dict(one[last], stream_in=np.zeros_like(np.array(one[last]["stream_in"])))
    with pytest.raises(AssertionError):
        check(x.mixing[last], mixing(no_residual), "mixing without the residual")


def test_past_512_tokens_the_mixing_and_rollouts_are_none(tmp_path):
    # A tiny decoder (tiny_gguf: 2 layers, 4 heads) whose context holds 600 tokens: the value
    # norms stay, the Grams the mixing and the rollouts come from are not kept (kMixingMaxTokens).
    gguf = tiny_gguf.write_zero_llama(tmp_path / "long.gguf", context=1024,
                                      fill={"token_embd.weight": 0.5, "output_norm.weight": 1.0,
                                            "blk.0.attn_norm.weight": 1.0,
                                            "blk.0.attn_v.weight": 0.25,
                                            "blk.0.attn_output.weight": 0.5})
    x = qkv.CausalLM(gguf).explain("a" * 600)
    n = len(x.tokens)
    assert n > 512
    assert x.value_norms.shape == (2, 4, n) and x.value_weighted.shape == (2, 4, n, n)
    # Layer 0 reads the embedding 0.5, RMS-normed to 1 (less the norm's ε: within 1e-4): v =
    # 0.25·16 = 4 per dimension, W_O^h v = 0.5·4·4 = 8 in each of 16 dimensions: ‖f‖ = 32.
    # Layer 1's W_V is 0.
    assert np.allclose(x.value_norms[0], 32.0, rtol=1e-4, atol=0), x.value_norms[0, 0, :3]
    assert np.all(x.value_norms[1] == 0)
    assert x.mixing is None and x.rollout is None and x.mixing_rollout is None
