"""Explanation's views of the one captured run: json() is `qkv explain --json`'s document and
terminal() what `qkv explain` prints, both read from the same record as html() and the arrays."""
import json

import numpy as np
import pytest

import qkv


@pytest.fixture(scope="module")
def bank():
    return qkv.Model().explain("I sat on the river bank")


def test_json_is_the_commands_document(bank):
    d = json.loads(bank.json(token="bank"))
    assert [t["text"] for t in d["tokens"]] == bank.tokens
    assert d["focus"] == bank.token_index("bank")
    assert d["model"] == {"layers": bank.layers, "heads": bank.heads, "head_dim": bank.head_dim}
    assert len(d["layers"]) == bank.layers
    # The same numbers as the arrays (float32 written in full).
    np.testing.assert_allclose(np.array(d["layers"][2]["weights"]), bank.weights[2], rtol=0,
                               atol=1e-7)
    assert "causal" not in d  # an encoder


def test_terminal_is_what_qkv_explain_prints(bank):
    overview = bank.terminal(token="bank")
    assert overview.startswith("qkv explain · all-MiniLM-L6-v2 · 6 layers × 12 heads")
    assert 'Where "bank" looks' in overview and "\x1b[" not in overview
    one = bank.terminal(token="bank", layer=2, head=5)
    assert "layer 2, head 5" in one and 'Where "bank" looks' not in one
    assert "\x1b[" in bank.terminal(color=True)
    with pytest.raises(ValueError, match="layer and head go together"):
        bank.terminal(layer=2)
    with pytest.raises(ValueError, match="layer 6 is out of range"):
        bank.terminal(layer=6, head=0)
    with pytest.raises(ValueError, match="token 'cat' is not a token of the text"):
        bank.terminal(token="cat")
