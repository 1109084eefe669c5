"""The GGUF families from Python (qkv.CausalLM): each tiny model of tests/golden/gguf_families —
llama (Llama 3 and Llama 2 style), qwen2, qwen3, gemma3 — explains with its architecture named,
runs the causal lens and generates. The numbers are checked against transformers in C++
(tests/models/gguf_families_test.cpp); here the Python door, and that its arrays are the
captured run's: every row of weights sums to 1 and the sliding layers' keys beyond the window
get none."""
import json
import os

import numpy as np
import pytest

import qkv

FAMILIES = {"llama3": "llama", "llama2": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
            "gemma3": "gemma3"}


def tiny(name):
    return os.path.join(os.environ["QKV_SOURCE_DIR"], "tests", "golden", "gguf_families",
                        f"tiny-{name}.gguf")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_explains_lenses_and_generates(name):
    lm = qkv.CausalLM(tiny(name))
    x = lm.explain("the cat sat on the mat again", target="", memory_limit=1 << 30)
    doc = json.loads(x.json())
    assert doc["model"]["architecture"] == FAMILIES[name]
    assert doc["model"]["attention_features"], doc["model"]
    w = x.weights[0]  # [heads, n, n]
    assert np.allclose(w.sum(-1), 1, atol=1e-5)
    assert x.lens is not None
    assert isinstance(lm.generate("the cat", max_tokens=3, chat=False), str)


def test_gemma3_sliding_layers_give_no_weight_beyond_the_window():
    x = qkv.CausalLM(tiny("gemma3")).explain("the cat sat on the mat again")
    w0, w2 = x.weights[0], x.weights[2]  # layer 0 slides over 4 positions; layer 2 is global
    n = w0.shape[-1]
    beyond = np.tril(np.ones((n, n), bool), -4)  # keys 4 or more positions back
    assert beyond.any()
    assert np.all(w0[:, beyond] == 0)
    assert np.any(w2[:, beyond] > 0)
