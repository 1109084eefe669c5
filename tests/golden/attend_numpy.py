#!/usr/bin/env python3
"""`qkv attend` against an independent float64 NumPy implementation of docs/CONVENTIONS.md §5.

The reference below is written straight from the formulas (it shares no code with src/ or cli/):

    logits = scale · score(q, k) + float_mask,   −∞ where masked (bool mask, causal, key lengths)
    weights = softmax over the keys (or, for --normalize none, the logits where visible, else 0)
    out = weights · v,   lse = log Σ_j exp(logits_j);   a fully masked row: out 0, weights 0, lse −∞

Random float64 inputs (fixed seed) are written with np.save, `qkv attend` is run on them with
--out/--weights/--lse for every scoring function × causal alignment and a set of extra cases, and
each result must match the reference to a relative error ≤ 1e-9 (see compare()).

Usage: python3 tests/golden/attend_numpy.py --qkv build/qkv [--keep DIR] [-k SUBSTRING]
Needs only numpy and the standard library. Prints one line per case and 'N passed, M failed'.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SEED = 20240611
RTOL = 1e-9
SCORES = ["scaled-dot", "dot", "general", "additive", "laplace", "cosine", "uniform"]
CAUSALS = [None, "top-left", "bottom-right"]

# ---------------------------------------------------------------------------------------------
# The reference: float64, one formula per line.


def reference(q, k, v, score="scaled-dot", scale=None, normalize="softmax", causal=None,
              mask=None, key_lengths=None, params=()):
    """q [B,Hq,L,Dq], k [B,Hkv,S,Dk], v [B,Hkv,S,Dv] → (out, weights, lse)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Hq, L, _ = q.shape
    Hkv, S, Dk = k.shape[1], k.shape[2], k.shape[3]
    group = Hq // Hkv
    k = np.repeat(k, group, axis=1)  # query head h reads kv head h // group
    v = np.repeat(v, group, axis=1)

    if score in ("scaled-dot", "dot"):
        s = np.einsum("bhld,bhsd->bhls", q, k)
    elif score == "general":  # qᵀ W k
        (w,) = params
        s = np.einsum("bhld,de,bhse->bhls", q, w, k)
    elif score == "additive":  # vᵀ tanh(W_q q + W_k k)
        w_q, w_k, a = params
        hidden = (q @ w_q.T)[:, :, :, None, :] + (k @ w_k.T)[:, :, None, :, :]
        s = np.tanh(hidden) @ a
    elif score == "laplace":  # −‖q − k‖₁
        s = -np.abs(q[:, :, :, None, :] - k[:, :, None, :, :]).sum(axis=-1)
    elif score == "cosine":
        qn = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-8)
        kn = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-8)
        s = np.einsum("bhld,bhsd->bhls", qn, kn)
    elif score == "uniform":
        s = np.zeros((B, Hq, L, S))
    else:
        raise ValueError(score)
    if scale is None:
        scale = 1.0 / math.sqrt(Dk) if score == "scaled-dot" else 1.0

    visible = np.ones((B, Hq, L, S), dtype=bool)
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    if causal == "top-left":
        visible &= j <= i
    elif causal == "bottom-right":
        visible &= j <= i + S - L
    logits = scale * s
    if mask is not None and mask.dtype == bool:
        visible &= np.broadcast_to(mask, visible.shape)
    elif mask is not None:
        logits = logits + mask
    if key_lengths is not None:
        visible &= (j[None, :, :] < np.asarray(key_lengths)[:, None, None])[:, None, :, :]
    logits = np.where(visible, logits, -np.inf)

    m = logits.max(axis=-1, keepdims=True)
    empty = np.isneginf(m)  # nothing to attend to
    e = np.exp(logits - np.where(empty, 0.0, m))
    total = e.sum(axis=-1, keepdims=True)
    lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, total)))[..., 0]
    if normalize == "none":  # lse stays log Σ exp(logits), as include/qkv/attention.h documents
        weights = np.where(visible, logits, 0.0)
    else:
        weights = np.where(empty, 0.0, e / np.where(empty, 1.0, total))
    out = weights @ v
    return out, weights, lse


# ---------------------------------------------------------------------------------------------
# The comparison.
#
# Relative error is elementwise, |x − r| / max(|r|, floor) with floor = 1e-3 · max|r| over the
# tensor: the floor keeps an output element that cancels to ≈ 0 (a sum of ± terms, whose rounding
# error is relative to the terms, not to the sum) from reading as a large relative error, while
# every element within 1000× of the largest is held to RTOL relative. Non-finite values and exact
# zeros must sit in exactly the same places (−∞ lse, 0 weights where masked, 0 rows).


def compare(x, r):
    """Returns (ok, max_abs, max_rel, why)."""
    x = np.asarray(x)
    if x.shape != r.shape:
        return False, math.inf, math.inf, f"shape {list(x.shape)}, expected {list(r.shape)}"
    x = x.astype(np.float64)
    for name, pattern in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf),
                          ("zero", lambda t: t == 0)):
        px, pr = pattern(x), pattern(r)
        if not np.array_equal(px, pr):
            where = np.argwhere(px != pr)[0]
            return (False, math.inf, math.inf,
                    f"{name} pattern differs at {tuple(where)}: got {x[tuple(where)]!r}, "
                    f"expected {r[tuple(where)]!r}")
    finite = np.isfinite(r)
    if not finite.any():
        return True, 0.0, 0.0, ""
    xf, rf = x[finite], r[finite]
    abs_err = np.abs(xf - rf)
    floor = max(1e-3 * np.abs(rf).max(), np.finfo(np.float64).tiny)
    rel_err = abs_err / np.maximum(np.abs(rf), floor)
    max_abs, max_rel = float(abs_err.max()), float(rel_err.max())
    return max_rel <= RTOL, max_abs, max_rel, "" if max_rel <= RTOL else "relative error > 1e-9"


def self_check(rng):
    """The comparison must accept the reference itself and reject small, wrong results."""
    q, k, v = (rng.standard_normal((1, 2, 7, 4)) for _ in range(3))
    out, w, lse = reference(q, k, v, causal="bottom-right", key_lengths=[5])
    lse_masked = reference(q, k, v, causal="top-left", key_lengths=[0])[2]
    checks = [
        ("identical out", out.copy(), out, True),
        ("identical lse with -inf", lse_masked.copy(), lse_masked, True),
        ("out × (1 + 1e-6)", out * (1 + 1e-6), out, False),
        ("weights × (1 + 1e-6)", w * (1 + 1e-6), w, False),
        ("one weight + 1e-6 relative", _bump(w), w, False),
        ("masked weight 0 → 1e-300", _fill_zero(w, 1e-300), w, False),
        ("lse -inf → -1e9", np.where(np.isneginf(lse_masked), -1e9, lse_masked), lse_masked, False),
        ("NaN in out", np.where(out == out.max(), np.nan, out), out, False),
        ("shape [1,2,7] vs [2,7]", lse[0], lse, False),
    ]
    failed = 0
    for name, x, r, want in checks:
        ok = compare(x, r)[0]
        if ok != want:
            failed += 1
            print(f"SELF-CHECK FAILED: compare() {'accepted' if ok else 'rejected'} '{name}'")
    if failed == 0:
        print(f"self-check: compare() accepts exact results and rejects {len(checks) - 2} "
              "perturbed ones (1e-6 relative, pattern flips, shape)")
    return failed == 0


def _bump(t):
    t = t.copy()
    idx = np.unravel_index(np.argmax(np.abs(t)), t.shape)
    t[idx] *= 1 + 1e-6
    return t


def _fill_zero(t, value):
    t = t.copy()
    t[np.unravel_index(np.argmin(np.where(t == 0, 0, 1)), t.shape)] = value
    return t


# ---------------------------------------------------------------------------------------------
# Running the command.


class Runner:
    def __init__(self, qkv, tmp, only=None):
        self.qkv, self.tmp, self.count, self.only = qkv, tmp, 0, only
        self.passed, self.failed = 0, 0

    def save(self, name, array):
        path = os.path.join(self.tmp, name + ".npy")
        np.save(path, array)
        return path

    def run(self, args):
        cmd = [self.qkv, "attend"] + [str(a) for a in args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return cmd, proc

    def report(self, name, ok, max_abs, max_rel, why="", cmd=None):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        status = "ok  " if ok else "FAIL"
        print(f"{status} {name:<44} max_abs {max_abs:9.3e}  max_rel {max_rel:9.3e}"
              + (f"  {why}" if why else ""))
        if not ok and cmd is not None:
            print("     reproduce: " + " ".join(cmd))

    def case(self, name, inputs, expect_dtype=np.float64, rtol_override=None, **opts):
        """inputs: dict of q, k, v (arrays); opts: the options of reference()."""
        if self.only and self.only not in name:
            return
        self.count += 1
        tag = f"c{self.count:03d}"
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        args = ["--query", self.save(tag + "_q", q), "--keys", self.save(tag + "_k", k),
                "--values", self.save(tag + "_v", v), "--score", opts.get("score", "scaled-dot")]
        if opts.get("scale") is not None:
            args += ["--scale", repr(float(opts["scale"]))]
        if opts.get("normalize"):
            args += ["--normalize", opts["normalize"]]
        if opts.get("causal"):
            args += ["--causal", opts["causal"]]
        if opts.get("mask") is not None:
            args += ["--mask", self.save(tag + "_mask", opts["mask"])]
        if opts.get("key_lengths") is not None:
            args += ["--key-lengths", ",".join(str(n) for n in opts["key_lengths"])]
        if opts.get("params"):
            args += ["--params"] + [self.save(f"{tag}_p{n}", p)
                                    for n, p in enumerate(opts["params"])]
        outputs = {key: f"{tag}_{key}.npy" for key in ("out", "weights", "lse")}
        for flag, file in outputs.items():
            args += ["--" + flag, os.path.join(self.tmp, file)]
        cmd, proc = self.run(args)
        if proc.returncode != 0:
            self.report(name, False, math.inf, math.inf,
                        f"exit {proc.returncode}: {proc.stderr.strip()[:300]}", cmd)
            return

        # Rank 3 [H, L, D] and rank 2 [L, D] inputs: B = H = 1, and the results keep q's rank.
        lead = 4 - q.ndim
        q4, k4, v4 = (t.reshape((1,) * lead + t.shape) for t in (q, k, v))
        ref = dict(zip(("out", "weights", "lse"), reference(q4, k4, v4, **opts)))
        ref = {key: r if r is None else r.reshape(r.shape[lead:]) for key, r in ref.items()}
        worst_abs, worst_rel, ok, why = 0.0, 0.0, True, ""
        for key, file in outputs.items():
            got = np.load(os.path.join(self.tmp, file))
            r = ref[key]
            if got.dtype != expect_dtype:
                ok, why = False, f"--{key} dtype {got.dtype}, expected {np.dtype(expect_dtype)}"
                break
            if rtol_override is not None:  # fp32 results: docs/CONVENTIONS.md §1.1
                good, a, rel, w = rtol_override(key, got, r)
            else:
                good, a, rel, w = compare(got, r)
            worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, rel)
            if not good:
                ok, why = False, f"--{key}: {w}"
                break
        self.report(name, ok, worst_abs, worst_rel, why, cmd)


# ---------------------------------------------------------------------------------------------
# The cases.


def make_params(rng, score, dq, dk, attn_dim=11):
    if score == "general":
        return (rng.standard_normal((dq, dk)) / math.sqrt(dq),)
    if score == "additive":
        return (rng.standard_normal((attn_dim, dq)) / math.sqrt(dq),
                rng.standard_normal((attn_dim, dk)) / math.sqrt(dk),
                rng.standard_normal(attn_dim))
    return ()


def qkv_inputs(rng, q_shape, kv_shape, dv=None):
    v_shape = kv_shape[:-1] + ((dv,) if dv else kv_shape[-1:])
    return {"q": rng.standard_normal(q_shape), "k": rng.standard_normal(kv_shape),
            "v": rng.standard_normal(v_shape)}


def fp32_tolerance(q, k, v, opts):
    """docs/CONVENTIONS.md §1.1: max|X − R| ≤ 2·max|N − R| + 1e-6, N a naive fp32 computation."""
    n = naive_fp32(q, k, v, **opts)

    def check(key, got, r):
        bound = 2 * np.abs(n[key] - r)[np.isfinite(r)].max() + 1e-6
        good, a, rel, w = compare(got, r)  # for the patterns and the reported errors
        pattern_ok = w == "" or w.startswith("relative")
        ok = pattern_ok and a <= bound
        return ok, a, rel, w if not pattern_ok else ("" if ok else f"max abs > bound {bound:.3e}")
    return check


def naive_fp32(q, k, v, causal=None, **_):
    """scaled-dot in float32 arithmetic throughout, the way a textbook loop would do it."""
    q, k, v = (t.astype(np.float32) for t in (q, k, v))
    L, S = q.shape[2], k.shape[2]
    s = np.einsum("bhld,bhsd->bhls", q, k) * np.float32(1 / math.sqrt(q.shape[-1]))
    if causal == "top-left":
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, np.float32(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    w = e / e.sum(axis=-1, keepdims=True)
    return {"out": w @ v, "weights": w, "lse": (m + np.log(e.sum(axis=-1, keepdims=True)))[..., 0]}


def run_cases(runner, rng):
    base = qkv_inputs(rng, (2, 3, 37, 16), (2, 3, 37, 16))
    shapes = {
        "": base,
        " gqa[Hkv=1]": qkv_inputs(rng, (2, 3, 37, 16), (2, 1, 37, 16)),
        " L29<S37": qkv_inputs(rng, (2, 3, 29, 16), (2, 3, 37, 16)),
        " L37>S29": qkv_inputs(rng, (2, 3, 37, 16), (2, 3, 29, 16)),
    }
    params = {s: make_params(rng, s, 16, 16) for s in SCORES}

    # Every scoring function × {no causal, top-left, bottom-right}, on each shape.
    for suffix, inputs in shapes.items():
        for score in SCORES:
            for causal in CAUSALS:
                name = f"{score} causal={causal or 'none'}{suffix}"
                runner.case(name, inputs, score=score, causal=causal, params=params[score])

    L, S = 37, 37
    # A bool mask [L, S] with a fully masked row (row 4) and a random pattern; alone and with causal.
    bool_mask = rng.random((L, S)) < 0.7
    bool_mask[4, :] = False
    runner.case("bool mask [L,S] (row 4 empty)", base, mask=bool_mask)
    runner.case("bool mask [L,S] + top-left", base, mask=bool_mask, causal="top-left")
    runner.case("bool mask [B,1,1,S] additive", base, score="additive", params=params["additive"],
                mask=rng.random((2, 1, 1, S)) < 0.5)
    # A float mask [B,1,L,S] added to the scores; one with −∞ entries and a fully −∞ row.
    runner.case("float mask [B,1,L,S]", base, mask=rng.standard_normal((2, 1, L, S)))
    fmask = np.where(rng.random((2, 3, L, S)) < 0.3, -np.inf, rng.standard_normal((2, 3, L, S)))
    fmask[1, 2, 7, :] = -np.inf
    runner.case("float mask with -inf [B,H,L,S] laplace", base, score="laplace", mask=fmask)
    # Key lengths, alone, with causal, and with a batch that sees nothing.
    runner.case("key-lengths 5,23", base, key_lengths=[5, 23])
    runner.case("key-lengths 9,30 + bottom-right cosine", shapes[" L29<S37"], score="cosine",
                key_lengths=[9, 30], causal="bottom-right")
    runner.case("key-lengths 0,37 (batch 0 empty)", base, key_lengths=[0, 37])
    # normalize none: the weights are the logits where visible, 0 where masked.
    runner.case("normalize none scaled-dot", base, normalize="none")
    runner.case("normalize none dot top-left", base, score="dot", normalize="none",
                causal="top-left")
    runner.case("normalize none laplace bool mask", base, score="laplace", normalize="none",
                mask=bool_mask)
    runner.case("normalize none general key-lengths", base, score="general", normalize="none",
                params=params["general"], key_lengths=[5, 23])
    # --scale: negative, zero, a temperature.
    runner.case("dot --scale -0.7", base, score="dot", scale=-0.7)
    runner.case("scaled-dot --scale 0", base, scale=0.0)
    runner.case("cosine --scale 10", base, score="cosine", scale=10.0)
    runner.case("laplace --scale 0.25 top-left", base, score="laplace", scale=0.25,
                causal="top-left")
    # Other head dims: Dv ≠ Dk; Dq ≠ Dk for general and additive; zero queries for cosine.
    runner.case("Dv=5", qkv_inputs(rng, (2, 3, 37, 16), (2, 3, 37, 16), dv=5))
    odd = {"q": rng.standard_normal((2, 2, 13, 6)), "k": rng.standard_normal((2, 1, 17, 9)),
           "v": rng.standard_normal((2, 1, 17, 3))}
    runner.case("general Dq=6 Dk=9 Dv=3 gqa", odd, score="general",
                params=make_params(rng, "general", 6, 9))
    runner.case("additive Dq=6 Dk=9 Dv=3 gqa bottom-right", odd, score="additive",
                causal="bottom-right", params=make_params(rng, "additive", 6, 9, attn_dim=4))
    zero_q = {key: t.copy() for key, t in base.items()}
    zero_q["q"][0, 1, 3, :] = 0.0  # ‖q‖ = 0: the 1e-8 clamp makes its cosine scores 0
    runner.case("cosine with a zero query", zero_q, score="cosine")
    # dtypes: float32 everywhere → float32 out; float32 q with float64 k, v → float64 out.
    f32 = {key: t.astype(np.float32) for key, t in base.items()}
    runner.case("float32 inputs → float32 (fp32 tolerance)", f32, expect_dtype=np.float32,
                rtol_override=fp32_tolerance(f32["q"], f32["k"], f32["v"], {}))
    mixed = dict(base, q=base["q"].astype(np.float32))
    runner.case("float32 q + float64 k,v → float64", mixed)
    # Rank 3 and rank 2 inputs.
    runner.case("rank 3 [H,L,D] top-left", {key: t[0] for key, t in base.items()},
                causal="top-left")
    runner.case("rank 2 [L,D] laplace", {key: t[1, 2] for key, t in base.items()}, score="laplace")
    return base


def json_case(runner, inputs):
    """One run through --json: the numbers (17 significant digits) and the metadata."""
    q, k, v = inputs["q"], inputs["k"][:, :, :29], inputs["v"][:, :, :29]
    args = ["--query", runner.save("json_q", q), "--keys", runner.save("json_k", k),
            "--values", runner.save("json_v", v), "--causal", "bottom-right", "--json"]
    name = "--json scaled-dot bottom-right L37>S29"
    cmd, proc = runner.run(args)
    if proc.returncode != 0:
        runner.report(name, False, math.inf, math.inf, f"exit {proc.returncode}: {proc.stderr}", cmd)
        return
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        runner.report(name, False, math.inf, math.inf, f"stdout is not one JSON object: {e}", cmd)
        return
    out, weights, lse = reference(q, k, v, causal="bottom-right")
    problems = []
    expected_meta = {"score": "scaled-dot", "normalize": "softmax", "causal": "bottom-right"}
    for key, want in expected_meta.items():
        if doc.get(key) != want:
            problems.append(f'"{key}" is {doc.get(key)!r}, expected {want!r}')
    if not isinstance(doc.get("scale"), (int, float)) or abs(doc["scale"] - 0.25) > 1e-15:
        problems.append(f'"scale" is {doc.get("scale")!r}, expected 0.25')
    shapes = doc.get("shapes", {})
    for key, want in (("query", q.shape), ("keys", k.shape), ("values", v.shape),
                      ("out", out.shape)):
        if shapes.get(key) != list(want):
            problems.append(f'"shapes"."{key}" is {shapes.get(key)!r}, expected {list(want)}')
    worst_abs, worst_rel = 0.0, 0.0
    for key, r in (("out", out), ("weights", weights), ("logsumexp", lse)):
        if key not in doc:
            problems.append(f'no "{key}"')
            continue
        got = np.array(_from_json_numbers(doc[key]), dtype=np.float64)
        good, a, rel, why = compare(got, r)
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, rel)
        if not good:
            problems.append(f'"{key}": {why}')
    runner.report(name, not problems, worst_abs, worst_rel, "; ".join(problems), cmd)


def _from_json_numbers(x):
    if isinstance(x, list):
        return [_from_json_numbers(e) for e in x]
    if isinstance(x, str):
        return {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}[x]
    return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qkv", required=True, help="path to the built qkv binary")
    parser.add_argument("--keep", help="write inputs and outputs here instead of a temp dir")
    parser.add_argument("-k", dest="only", help="run only the cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.qkv, os.X_OK):
        print(f"attend_numpy.py: --qkv {args.qkv} is not an executable file")
        return 2

    start = time.monotonic()
    rng = np.random.default_rng(SEED)
    if not self_check(rng):
        print("0 passed, 1 failed")
        return 1
    with tempfile.TemporaryDirectory(prefix="qkv-golden-") as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        runner = Runner(os.path.abspath(args.qkv), work, args.only)
        base = run_cases(runner, rng)
        if not args.only or args.only in "--json":
            json_case(runner, base)
    print(f"seed {SEED}, {time.monotonic() - start:.1f} s")
    print(f"{runner.passed} passed, {runner.failed} failed")
    return 0 if runner.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
