"""precision="bf16" (opt-in) in qkv.attention, qkv.attention_backward and qkv.Model: the float64
reference path equals the NumPy reference of q, k, v rounded to bfloat16 (rounded here, from the
format's definition); the default "fp32" is unchanged; a saved forward of the other precision is
refused; the sentence model's bf16 embeddings stay within 1e-2 cosine distance of fp32's on the
golden texts (docs/CONVENTIONS.md §1.1b)."""

import json
import os

import numpy as np
import pytest

import qkv
from conftest import SOURCE_DIR
from conftest import attend_numpy as ref


def bf16(x):
    """x rounded to the nearest bfloat16 (8 significant bits), ties to even, for normal floats:
    frexp gives x = m·2^e with |m| in [0.5, 1), so m·2⁸ rounded to an integer keeps 8 bits."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.ldexp(np.rint(m * 256.0), e - 8)  # np.rint rounds half to even


def check(got, expected, what):
    ok, max_abs, max_rel, why = ref.compare(got, expected)
    assert ok, f"{what}: {why} (max abs {max_abs:.3g}, max rel {max_rel:.3g})"


def test_the_rounding_here_is_bfloat16():
    assert bf16(1 + 2**-8) == 1.0  # a tie: 1 is even
    assert bf16(1 + 3 * 2**-8) == 1 + 2**-6  # a tie: up to even
    assert bf16(-(1 + 0.51 * 2**-7)) == -(1 + 2**-7)


@pytest.mark.parametrize("score", ["scaled_dot", "laplace", "cosine"])
def test_the_reference_path_in_bf16_is_float64_on_the_rounded_inputs(score):
    rng = np.random.default_rng(31)
    # float64 arrays of float32 values: qkv rounds a float64 through float32 (no double rounding
    # then), bf16() here rounds it directly.
    q, k, v = (rng.standard_normal((1, 2, n, 8)).astype(np.float32).astype(np.float64)
               for n in (5, 7, 7))
    out, w = qkv.attention(q, k, v, score=score, need_weights=True, path="reference",
                           precision="bf16")
    want_out, want_w, _ = ref.reference(bf16(q), bf16(k), bf16(v), score=score.replace("_", "-"))
    check(out, want_out, "out")
    check(w, want_w, "weights")
    # Not the unrounded inputs' result: the option did something.
    assert np.abs(out - ref.reference(q, k, v, score=score.replace("_", "-"))[0]).max() > 1e-4
    # The backward differentiates with dout rounded too.
    dout = rng.standard_normal(out.shape).astype(np.float32).astype(np.float64)
    g = qkv.attention_backward(dout, q, k, v, score=score, precision="bf16")
    want = qkv.attention_backward(bf16(dout), bf16(q), bf16(k), bf16(v), score=score)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(g, name), getattr(want, name), err_msg=name)


def test_fp32_stays_the_default_bit_for_bit():
    rng = np.random.default_rng(32)
    q, k, v = (rng.standard_normal((2, 3, 17, 16)).astype(np.float32) for _ in range(3))
    default = qkv.attention(q, k, v, is_causal=True)
    np.testing.assert_array_equal(qkv.attention(q, k, v, is_causal=True, precision="fp32"),
                                  default)


def test_a_bad_precision_is_named():
    q = np.ones((2, 4), dtype=np.float32)
    with pytest.raises(ValueError, match=r"^precision 'fp16'; expected one of fp32, bf16$"):
        qkv.attention(q, q, q, precision="fp16")
    with pytest.raises(TypeError, match="precision"):
        qkv.attention_backward(q, q, q, q, precision=16)
    with pytest.raises(ValueError, match="precision"):
        qkv.Model(precision="bfloat16")


def test_a_saved_forward_of_the_other_precision_is_refused():
    rng = np.random.default_rng(33)
    q, k, v = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3))
    out, saved = qkv.attention(q, k, v, keep_for_backward=True, precision="bf16")
    with pytest.raises(ValueError, match="with precision bf16, not fp32"):
        qkv.attention_backward(np.ones_like(out), q, k, v, saved=saved)
    qkv.attention_backward(np.ones_like(out), q, k, v, saved=saved, precision="bf16")


def test_the_fused_path_in_bf16_is_near_the_rounded_inputs_reference():
    """Needs the kernels to honour FlashProblem::precision (the lead's "flash bf16:" commit)."""
    rng = np.random.default_rng(34)
    q, k, v = (rng.standard_normal((1, 4, 33, 16)).astype(np.float32) for _ in range(3))
    x = qkv.attention(q, k, v, path="fused", precision="bf16")
    r = qkv.attention(*(t.astype(np.float64) for t in (q, k, v)), precision="bf16")
    # Against R_b only P's rounding is left: u = 2⁻⁸ relative to the |v| it weighs.
    assert np.abs(x - r).max() < 2**-8 * np.abs(v).max()
    assert not np.array_equal(x, qkv.attention(q, k, v, path="fused"))


def test_the_sentence_model_in_bf16_is_within_1e_2_cosine_distance_of_fp32():
    with open(os.path.join(SOURCE_DIR, "tests", "golden", "minilm", "texts.json"),
              encoding="utf-8") as f:
        texts = json.load(f)
    fp32 = qkv.Model().encode(texts)
    model = qkv.Model(precision="bf16")
    assert model.precision == "bf16" and qkv.Model().precision == "fp32"
    e = model.encode(texts)
    assert e.dtype == np.float32 and e.shape == fp32.shape
    distance = 1 - np.sum(e.astype(np.float64) * fp32, axis=1)  # both unit rows
    assert distance.max() <= 1e-2, distance.max()
    assert distance.mean() > 1e-6  # bf16 did something
