"""CausalLM.explain_generation (`qkv generate --explain` from Python) on SmolLM2-135M: every number
equals the command's --json; the tokens are plain generation's; the KV cache's size is the
model's layers × kv heads × head_dim × K and V × float32 a position (30 × 3 × 64 × 2 × 4, from
its model card); where a head's last query looked is a NumPy softmax of the captured q and k
(conftest's attend_numpy, independent of qkv); the attribution's parts sum to the logit. The
comparator is shown to reject a perturbed number."""
import json
import subprocess
import sys

import numpy as np
import pytest

import qkv
from conftest import attend_numpy

PROMPT = "The capital of France is"
TOKENS = 4
BYTES_PER_POSITION = 30 * 3 * 64 * 2 * 4


@pytest.fixture(scope="module")
def lm():
    return qkv.CausalLM()


@pytest.fixture(scope="module")
def generated(lm):
    return lm.explain_generation(PROMPT, TOKENS, chat=False)


@pytest.fixture(scope="module")
def command():
    r = subprocess.run([sys.executable, "-m", "qkv", "generate", PROMPT, "--explain", "--json",
                        "--max-tokens", str(TOKENS)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def same_numbers(g, d):
    """The comparator: every number of the ExplainedGeneration `g` (objects and arrays) equal to
    the command's document `d`, exactly (the same float64s, printed in 17 digits)."""
    c = d["cache"]
    assert g.cache["sharing"] == {s["kv_head"]: s["heads"] for s in c["sharing"]}
    assert all(g.cache[k] == c[k] for k in c if k != "sharing")
    assert (g.prompt_tokens, g.ids, g.tokens) == (
        d["prompt_tokens"], [t["id"] for t in d["tokens"]], [t["text"] for t in d["tokens"]])
    assert len(g.steps) == len(d["steps"])
    for i, (s, t) in enumerate(zip(g.steps, d["steps"])):
        for k in ("step", "id", "text", "positions", "queries", "cache_bytes", "logit",
                  "log_prob", "attribution"):
            assert getattr(s, k) == t[k], f"step {i}: {k}"
        assert g.cache_bytes[i] == t["cache_bytes"] and g.positions[i] == t["positions"]
        assert (g.logits[i], g.log_probs[i]) == (t["logit"], t["log_prob"])
        assert list(g.attribution[i]) == [t["attribution"][k]
                                          for k in ("embedding", "attention", "mlp", "total")]
        assert len(s.heads) == len(t["heads"])
        for j, (h, e) in enumerate(zip(s.heads, t["heads"])):
            assert (h.layer, h.head, h.kv_head, h.attribution) == (
                e["layer"], e["head"], e["kv_head"], e["attribution"])
            assert list(g.head_index[i, j]) == [e["layer"], e["head"], e["kv_head"]]
            assert g.head_attribution[i, j] == e["attribution"]
            assert [(k.position, k.text, k.weight) for k in h.looked] == [
                (k["position"], k["text"], k["weight"]) for k in e["looked"]]
            assert list(g.looked_positions[i, j]) == [k["position"] for k in e["looked"]]
            assert list(g.looked_weights[i, j]) == [k["weight"] for k in e["looked"]]


def test_every_number_is_the_commands(generated, command):
    same_numbers(generated, command)
    assert json.loads(generated.json()) == command


def test_the_comparator_rejects_a_perturbed_number(generated, command):
    for path in (("steps", 1, "heads", 0, "looked", 1, "weight"), ("steps", 2, "logit"),
                 ("steps", 3, "cache_bytes")):
        d = json.loads(json.dumps(command))
        at = d
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] += 1e-12 if isinstance(at[path[-1]], float) else 1
        with pytest.raises(AssertionError):
            same_numbers(generated, d)


def test_tokens_are_plain_generations_and_the_cache_grows_a_position_a_step(lm, generated):
    assert generated.text == lm.generate(PROMPT, TOKENS, chat=False)
    prompt = lm.token_ids(PROMPT)
    assert generated.prompt_tokens == len(prompt) and generated.ids[:len(prompt)] == prompt
    assert [s.id for s in generated.steps] == generated.ids[len(prompt):]
    positions = len(prompt) + np.arange(len(generated.steps))
    assert list(generated.positions) == list(positions)
    assert list(generated.cache_bytes) == list(positions * BYTES_PER_POSITION)
    assert [s.queries for s in generated.steps] == [len(prompt)] + [1] * (TOKENS - 1)
    assert generated.cache["group"] == 3 and generated.cache["sharing"][1] == [3, 4, 5]
    assert all(h.kv_head == h.head // 3 for s in generated.steps for h in s.heads)


def test_heads_looked_where_a_numpy_softmax_of_their_q_and_k_puts_weight(lm, generated):
    # Step 0 was chosen after the prompt alone: its heads' last query over the prompt's keys.
    x = lm.explain(PROMPT)
    for h in generated.steps[0].heads:
        q, k, v = (a[None, None, h.layer, h.head] for a in (x.q, x.k, x.v))  # [1, 1, n, d]
        w = attend_numpy.reference(q, k, v, causal="top-left")[1][0, 0, -1]
        order = np.argsort(-w, kind="stable")[:len(h.looked)]
        assert [k.position for k in h.looked] == list(order)
        assert np.allclose([k.weight for k in h.looked], w[order], rtol=0, atol=1e-6)
    # Heads by attribution, largest first; the parts sum to the logit.
    assert all(np.all(np.diff(row) <= 0) for row in generated.head_attribution)
    parts = generated.attribution
    assert np.allclose(parts[:, :3].sum(axis=1), parts[:, 3], rtol=1e-9, atol=0)
    assert np.allclose(parts[:, 3], generated.logits, rtol=1e-3, atol=0)
    assert generated.steps[0].text == " Paris"


def test_bad_arguments_are_named(lm):
    with pytest.raises(ValueError, match="top_heads"):
        lm.explain_generation(PROMPT, 2, top_heads=0)
    with pytest.raises(ValueError, match="max_tokens"):
        lm.explain_generation(PROMPT, 0)
    with pytest.raises(TypeError, match="prompt"):
        lm.explain_generation(b"bytes", 2)
