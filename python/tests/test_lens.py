"""CausalLM.explain(text, target=...): the causal lens as arrays — checked against transformers'
numbers (tests/golden/smollm2/lens.json, made by tests/golden/make_smollm2_lens_goldens.py) and
the attribution's identity; bad lens input raises ValueError naming it."""
import json
import os

import numpy as np
import pytest

import qkv

TEXT = "The capital of France is"


@pytest.fixture(scope="module")
def explained():
    return qkv.CausalLM().explain(TEXT, target=" Paris", versus=" Rome")


def test_arrays_are_transformers_ablations(explained, golden_dir):
    with open(os.path.join(golden_dir, "smollm2", "lens.json")) as f:
        golden = json.load(f)["pairs"][0]
    lens = explained.lens
    assert isinstance(lens, qkv.CausalLens)
    assert lens.ablation.shape == (30, 9) and not lens.ablation.flags.writeable
    clean = golden["clean"]["logit"]
    assert abs(lens.clean["logit"] - clean) <= 1e-3 * abs(clean)
    every = np.array(golden["every_head"]["zero_ablation_metric_change"]).reshape(30, 9)
    assert np.max(np.abs(lens.ablation - every)) <= 1e-3 * abs(clean)
    # The checker tells a perturbed golden apart.
    every[23, 4] += 2e-2 * abs(clean)
    assert np.max(np.abs(lens.ablation - every)) > 1e-3 * abs(clean)
    assert lens.top_heads("ablation", 1)[0][:2] == (23, 4)


def test_attribution_sums_to_the_metric(explained):
    lens = explained.lens
    parts = lens.embedding + lens.direct_logit_attribution.sum() + lens.mlp.sum()
    assert abs(parts - lens.clean["metric"]) <= 1e-3 * abs(lens.clean["metric"])
    assert np.allclose(lens.direct_logit_attribution.sum(axis=1), lens.attention, atol=1e-4)
    assert lens.logit_lens[-1]["top"][0][0] == " Paris"
    assert "Which heads carried \" Paris\"?" in explained.terminal()


def test_no_lens_without_asking_and_bad_input_named():
    lm = qkv.CausalLM()
    assert lm.explain("Hello").lens is None
    with pytest.raises(ValueError, match=r'--target " Parisian capital" is 3 tokens'):
        lm.explain(TEXT, target=" Parisian capital")
    with pytest.raises(ValueError, match="equal token length"):
        lm.explain(TEXT, target=" Paris", corrupt="The capital of Italy is not")
