"""Writes tests/golden/ggml_quants/: for each quantized ggml type qkv reads (Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, Q4_K, Q5_K, Q6_K), blocks of random bytes and what the `gguf` package (llama.cpp's own Python
reader, PyPI) dequantizes them to:

    TYPE.bin   the blocks as stored: 8 rows of 256 values (8 blocks of 32 or 1 of 256 a row)
    TYPE.npy   gguf.quants.dequantize of them, float32 [8, 256]
    quants.gguf  every TYPE.bin as a tensor named after its type, written by gguf's GGUFWriter

and the GGUF fuzz target's seeds in tests/fuzz/corpus/gguf/: quant_types.gguf, one row of each
type qkv reads (F32, F16, BF16 too), and unread_q2_k.gguf, a Q2_K tensor, which qkv refuses.
tests/core/ggml_quants_test.cpp requires qkv's dequantization to equal these bit for bit.

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_ggml_quant_goldens.py

Needs numpy and gguf (pip install gguf) in a venv outside the repository; `make test` never runs
it. Deterministic: the same files each run (a fixed seed).

The bytes are random except the f16 scales (d, and m or dmin where the type has one), drawn finite
and modest so that every value is finite. The first blocks are set by hand: a zero scale (every
value ±0, the sign of (q − offset)·0 kept), every quant bit set (the largest q), negative
minimums (m, dmin < 0 with the largest 6-bit min), and a subnormal scale.
"""
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ggml_quants")
SEEDS = os.path.join(HERE, "..", "fuzz", "corpus", "gguf")
ROWS, COLS = 8, 256

# Byte offsets of each type's f16 fields in its block: (scale d, minimum m or dmin or None),
# from ggml-common.h's block_* structs.
F16_FIELDS = {
    T.Q4_0: (0, None),
    T.Q4_1: (0, 2),
    T.Q5_0: (0, None),
    T.Q5_1: (0, 2),
    T.Q8_0: (0, None),
    T.Q4_K: (0, 2),
    T.Q5_K: (0, 2),
    T.Q6_K: (208, None),  # ql[128] qh[64] scales[16] d
}


def f16_bytes(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def blocks_of(qtype, rng):
    """[ROWS · COLS / block] blocks of qtype: random bytes, sane scales, edge blocks first."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = ROWS * COLS // block
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    d_at, m_at = F16_FIELDS[qtype]
    # Scales of either sign, 2^-8 … 2^0 in magnitude: finite products for every q.
    scales = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-8, 0, n))
    b[:, d_at:d_at + 2] = f16_bytes(scales)
    if m_at is not None:
        mins = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-8, 0, n))
        b[:, m_at:m_at + 2] = f16_bytes(mins)
    f16 = [(d_at, d_at + 2)] + ([(m_at, m_at + 2)] if m_at is not None else [])
    quant = np.ones(size, dtype=bool)  # the bytes that are not f16 scales
    for lo, hi in f16:
        quant[lo:hi] = False
    # Block 0: a zero scale. Block 1: every quant bit set (q at its largest; 6-bit scales and
    # mins at 63; Q6_K's int8 scales at −1). Block 2: a negative minimum with every bit of the
    # mins set (the K-quants' 6-bit m at 63), a negative scale. Block 3: a subnormal scale.
    b[0, d_at:d_at + 2] = f16_bytes([0.0])
    b[1, quant] = 0xFF
    b[1, d_at:d_at + 2] = f16_bytes([0.75])
    if m_at is not None:
        b[2, quant] = 0xFF
        b[2, d_at:d_at + 2] = f16_bytes([-0.125])
        b[2, m_at:m_at + 2] = f16_bytes([-3.5])
    b[3, d_at:d_at + 2] = f16_bytes([2.0 ** -20])
    return b


def main():
    rng = np.random.default_rng(29)
    os.makedirs(OUT, exist_ok=True)
    writer = gguf.GGUFWriter(os.path.join(OUT, "quants.gguf"), "quants")
    for qtype in F16_FIELDS:
        rows = blocks_of(qtype, rng).reshape(ROWS, -1)
        values = gguf.quants.dequantize(rows, qtype)
        assert values.dtype == np.float32 and values.shape == (ROWS, COLS)
        assert np.isfinite(values).all(), qtype.name
        rows.tofile(os.path.join(OUT, qtype.name + ".bin"))
        np.save(os.path.join(OUT, qtype.name + ".npy"), values)
        writer.add_tensor(qtype.name, rows, raw_dtype=qtype)
    write(writer)

    # The fuzz seeds: one row of 256 values of each type qkv reads; a Q2_K row.
    seed = gguf.GGUFWriter(os.path.join(SEEDS, "quant_types.gguf"), "quants")
    seed.add_tensor("F32", rng.standard_normal((1, COLS)).astype(np.float32))
    seed.add_tensor("F16", rng.standard_normal((1, COLS)).astype(np.float16))
    bf16 = (rng.standard_normal(COLS).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    seed.add_tensor("BF16", bf16.view(np.uint8).reshape(1, -1), raw_dtype=T.BF16)
    for qtype in F16_FIELDS:
        seed.add_tensor(qtype.name, blocks_of(qtype, rng).reshape(ROWS, -1)[4:5],
                        raw_dtype=qtype)
    write(seed)
    unread = gguf.GGUFWriter(os.path.join(SEEDS, "unread_q2_k.gguf"), "quants")
    q2k = rng.integers(0, 256, size=(1, gguf.GGML_QUANT_SIZES[T.Q2_K][1]), dtype=np.uint8)
    unread.add_tensor("Q2_K", q2k, raw_dtype=T.Q2_K)
    write(unread)


def write(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
