#!/usr/bin/env python3
"""qkv.attention next to torch.nn.functional.scaled_dot_product_attention, both called from
Python on the same arrays (torch.from_numpy shares the NumPy memory) with the same threads.

    compare_python.py [--threads N] [--repeats R] [--quick] [--case NAME,...] [--json]

What a Python user sees: each call's whole cost — argument checks, the kernel, the result array —
not the kernel alone (that is `qkv bench attention` and compare_torch.py). The cases are qkv's own
(`python -m qkv bench attention --list --json`), float32, forward and backward, each backward
alone after an untimed forward (torch: out.backward(dout) after a forward with requires_grad;
qkv: qkv.attention_backward given qkv.attention's SavedForward, keep_for_backward=True).
Before timing, each case checks that both agree: max |qkv − torch| within 1e-4 of max |torch|
(float32, two different summation orders). A warm-up, then the median of --repeats.
The ratio is torch's time over qkv's: > 1 means qkv is faster.

Needs the qkv package (pip install ., or PYTHONPATH=build/python) and torch: run it with the venv of
bench/setup_torch_venv.sh after `pip install .` into it, or with PYTHONPATH=build/python from a
Python of the same version as the build's (see bench/README.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

DEFAULT = ["1k", "1k-causal", "4k", "4k-causal", "4k-gqa", "4k-d128", "decode"]


def cases(quick):
    cmd = [sys.executable, "-m", "qkv", "bench", "attention", "--list", "--json"]
    if quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {d["case"]: d for d in (json.loads(line) for line in out.splitlines()
                                   if line.startswith("{"))}


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="the cases at 1/16 length: a smoke test")
    ap.add_argument("--case", default=",".join(DEFAULT), help="cases, e.g. 1k,decode")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    args = ap.parse_args()

    os.environ["QKV_NUM_THREADS"] = str(args.threads)
    import qkv
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)

    registry = cases(args.quick)
    rng = np.random.default_rng(0)
    rows = []
    for name in args.case.split(","):
        if name not in registry:
            sys.exit(f"compare_python: no case {name!r}; expected one of {', '.join(registry)}")
        c = registry[name]
        B, Hq, Hkv, L, S, D = (int(c[x]) for x in ("B", "Hq", "Hkv", "L", "S", "D"))
        causal = bool(c["causal"])
        q = rng.standard_normal((B, Hq, L, D), dtype=np.float32)
        k = rng.standard_normal((B, Hkv, S, D), dtype=np.float32)
        v = rng.standard_normal((B, Hkv, S, D), dtype=np.float32)
        dout = rng.standard_normal((B, Hq, L, D), dtype=np.float32)
        gqa = Hq != Hkv
        # qkv's causal cases are bottom-right (L = S apart from decode, where it is the same as
        # none); torch's is_causal is top-left, identical when L = S.
        kw = dict(is_causal=causal, enable_gqa=gqa)
        tq, tk, tv, tdout = (torch.from_numpy(a) for a in (q, k, v, dout))

        def qkv_fwd():
            return qkv.attention(q, k, v, **kw)

        def torch_fwd():
            with torch.inference_mode():
                return F.scaled_dot_product_attention(tq, tk, tv, **kw)

        # Both backwards are timed alone, given their forward's saved state: qkv's SavedForward
        # (keep_for_backward), torch's autograd graph.
        _, saved = qkv.attention(q, k, v, keep_for_backward=True, **kw)

        def qkv_bwd():
            return qkv.attention_backward(dout, q, k, v, saved=saved, **kw)

        def torch_bwd():
            a, b_, c_ = (t.detach().requires_grad_() for t in (tq, tk, tv))
            out = F.scaled_dot_product_attention(a, b_, c_, **kw)
            t0 = time.perf_counter()
            out.backward(tdout)
            return time.perf_counter() - t0

        mine, theirs = qkv_fwd(), torch_fwd().numpy()
        diff = float(np.abs(mine - theirs).max() / np.abs(theirs).max())
        if not diff <= 1e-4:
            sys.exit(f"compare_python: {name}: qkv and torch differ by {diff:.2e} of the largest")
        row = {"case": name, "threads": args.threads,
               "fwd_qkv_ms": median_time(qkv_fwd, args.repeats) * 1e3,
               "fwd_torch_ms": median_time(torch_fwd, args.repeats) * 1e3,
               "max_rel_diff": diff, "fwd_gflop": float(c["fwd_flops"]) / 1e9}
        if L > 1:
            row["bwd_qkv_ms"] = median_time(qkv_bwd, args.repeats) * 1e3
            torch_bwd()
            row["bwd_torch_ms"] = statistics.median(torch_bwd() for _ in range(args.repeats)) * 1e3
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    if args.json:
        return
    print(f"From Python, float32, {args.threads} threads, median of {args.repeats} "
          f"(torch {torch.__version__}); ratio = torch time / qkv time")
    print(f"{'case':<11} {'fwd qkv':>9} {'fwd torch':>10} {'ratio':>6} {'GFLOP/s':>8}"
          f" {'bwd qkv':>9} {'bwd torch':>10} {'ratio':>6}")
    for r in rows:
        bwd = ""
        if "bwd_qkv_ms" in r:
            bwd = (f" {r['bwd_qkv_ms']:>7.1f}ms {r['bwd_torch_ms']:>8.1f}ms"
                   f" {r['bwd_torch_ms'] / r['bwd_qkv_ms']:>5.2f}×")
        print(f"{r['case']:<11} {r['fwd_qkv_ms']:>7.2f}ms {r['fwd_torch_ms']:>8.2f}ms"
              f" {r['fwd_torch_ms'] / r['fwd_qkv_ms']:>5.2f}×"
              f" {r['fwd_gflop'] / r['fwd_qkv_ms'] * 1e3:>8.1f}{bwd}")


if __name__ == "__main__":
    main()
