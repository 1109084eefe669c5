"""A plain numpy quantizer for ggml's Q4_K, Q5_K and Q6_K blocks (gguf-py 0.19 dequantizes them but
cannot quantize them). Any valid block that approximates the weights will do for tests: these are
the simple "min/max per sub-block" choices, not llama.cpp's searched scales.

Layouts learned from ggml-common.h (block_q4_K, block_q5_K, block_q6_K) and gguf-py's
quants.py dequantizers, which check every block here (quantize -> gguf.quants.dequantize).
A super-block holds QK_K = 256 weights, so a row's length must be a multiple of 256.

  Q4_K (144 bytes): d f16, dmin f16, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of
        4-bit q; weight = d*sc[j]*q - dmin*m[j], sub-block j of 32. Byte i of qs holds sub-block
        2*(i//32) in its low nibble and 2*(i//32)+1 in its high nibble, at position i%32.
  Q5_K (176 bytes): as Q4_K, plus qh[32] before qs: bit j of qh[l] is the 5th bit of sub-block j's
        weight l.
  Q6_K (210 bytes): ql[128], qh[64], 16 int8 scales, d f16; weight = d*sc[s]*(q-32), sub-block s
        of 16; see _pack_q6 for where each of q's six bits lives.
"""
import numpy as np

QK_K = 256


def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def _pack_scale_min(sc, mn):
    """Eight 6-bit scales and mins per block [n, 8] -> the 12 packed bytes [n, 12]."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mn[:, 4:8] & 0x0F) << 4)
    return out


def _affine_blocks(x, levels):
    """Per sub-block of 32: weight ~ d*sc*q - dmin*m with q in [0, levels]; returns the f16 d and
    dmin [n], the 6-bit sc and m [n, 8] and q [n, 8, 32]."""
    n = x.shape[0]
    sub = x.reshape(n, 8, 32).astype(np.float64)
    lo = np.minimum(sub.min(axis=2), 0.0)  # the offset is -dmin*m <= 0, so the range includes 0
    hi = sub.max(axis=2)
    step = (hi - lo) / levels
    offset = -lo
    d = _f16(step.max(axis=1) / 63.0)
    dmin = _f16(offset.max(axis=1) / 63.0)
    d64 = d.astype(np.float64)[:, None]
    dmin64 = dmin.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d64 > 0, np.rint(step / d64), 0).clip(0, 63)
        m = np.where(dmin64 > 0, np.rint(offset / dmin64), 0).clip(0, 63)
        eff_step = (d64 * sc)[:, :, None]
        eff_off = (dmin64 * m)[:, :, None]
        q = np.where(eff_step > 0, np.rint((sub + eff_off) / eff_step), 0).clip(0, levels)
    return d, dmin, sc, m, q.astype(np.uint8)


def _pack_nibbles(q):
    """q [n, 8, 32] of 4-bit values -> qs [n, 128]: sub-blocks 2k, 2k+1 share bytes 32k..32k+31."""
    n = q.shape[0]
    pairs = q.reshape(n, 4, 2, 32)
    return (pairs[:, :, 0, :] | (pairs[:, :, 1, :] << 4)).reshape(n, 128)


def quantize_q4_k(x):
    """x [n, 256] float32 -> blocks [n, 144] uint8."""
    d, dmin, sc, m, q = _affine_blocks(x, 15)
    head = np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8)], 1)
    return np.concatenate([head, _pack_scale_min(sc, m), _pack_nibbles(q)], axis=1)


def quantize_q5_k(x):
    """x [n, 256] float32 -> blocks [n, 176] uint8."""
    d, dmin, sc, m, q = _affine_blocks(x, 31)
    n = x.shape[0]
    qh = np.zeros((n, 32), dtype=np.uint8)
    for j in range(8):
        qh |= ((q[:, j, :] >> 4) & 1) << j
    head = np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8)], 1)
    return np.concatenate([head, _pack_scale_min(sc, m), qh, _pack_nibbles(q & 0x0F)], axis=1)


def _pack_q6(q):
    """q [n, 256] of 6-bit values -> ql [n, 128], qh [n, 64]. Within each half h of 128 weights,
    weight r: its low 4 bits are the low nibble of ql[64h + r] (r < 64) or the high nibble of
    ql[64h + r - 64]; its top 2 bits are bits 2*(r//32) of qh[32h + r%32]."""
    n = q.shape[0]
    halves = q.reshape(n, 2, 128)
    low = halves & 0x0F
    ql = (low[:, :, 0:64] | (low[:, :, 64:128] << 4)).reshape(n, 128)
    top = (halves >> 4).reshape(n, 2, 4, 32)
    qh = np.zeros((n, 2, 32), dtype=np.uint8)
    for k in range(4):
        qh |= top[:, :, k, :] << (2 * k)
    return ql, qh.reshape(n, 64)


def quantize_q6_k(x):
    """x [n, 256] float32 -> blocks [n, 210] uint8; symmetric, q - 32 in [-32, 31]."""
    n = x.shape[0]
    sub = x.reshape(n, 16, 16).astype(np.float64)
    step = np.abs(sub).max(axis=2) / 31.0
    d = _f16(step.max(axis=1) / 127.0)
    d64 = d.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d64 > 0, np.rint(step / d64), 0).clip(-128, 127)
        eff = (d64 * sc)[:, :, None]
        q = np.where(eff > 0, np.rint(sub / eff), 0).clip(-32, 31) + 32
    ql, qh = _pack_q6(q.reshape(n, QK_K).astype(np.uint8))
    scales = sc.astype(np.int8).view(np.uint8)
    return np.concatenate([ql, qh, scales, d.reshape(-1, 1).view(np.uint8)], axis=1)


QUANTIZERS = {"Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k}


def quantize(rows, type_name):
    """rows [r, c] float32 with c % 256 == 0 -> bytes [r, c/256 * block bytes] uint8."""
    r, c = rows.shape
    if c % QK_K:
        raise ValueError(f"{type_name}: rows of {c} are not a multiple of {QK_K}")
    blocks = QUANTIZERS[type_name](rows.reshape(-1, QK_K).astype(np.float32))
    return blocks.reshape(r, -1)


if __name__ == "__main__":
    import gguf

    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.08, size=(64, 512)).astype(np.float32)
    w[3] = 0.0  # an all-zero row must survive (scales 0)
    for name in ("Q4_K", "Q5_K", "Q6_K"):
        back = gguf.quants.dequantize(quantize(w, name), gguf.GGMLQuantizationType[name])
        rel = np.abs(back - w).max() / np.abs(w).max()
        print(f"{name}: shape {back.shape}, max |error| / max |w| = {rel:.4f}")
