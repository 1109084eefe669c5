#!/usr/bin/env python3
"""qkv's decoder next to llama.cpp and transformers on the same GGUF file: `qkv bench model`.

    compare_llm.py [--qkv ./build/qkv] [--gguf FILE] [--threads N] [--quick] [--repeats R]
                   [--skip llama.cpp|transformers] [--json]

Runs `qkv bench model --model FILE --json --threads N` first: twice, `--weights file` (on the
file's blocks) and `--weights float32` (dequantized at load), when its --help offers --weights;
once, labelled "qkv", when not. Its rows carry the prompt's token ids and the ids qkv generated,
so each peer gets exactly the same work: the same GGUF file, the same prompt ids, the same
threads. The peers, as qkv measures itself:

  prompt-512   one evaluation of the prompt with an empty cache, the last position's logits and
               their argmax: the time to the first generated token
  decode-128   128 further tokens, greedy (the argmax of the last logits), one evaluation a token

a warm-up, then the median of --repeats. llama.cpp runs through llama-cpp-python's low-level API
(llama_decode, llama_get_logits_ith: no sampler), n_batch = n_ubatch ≥ 512 so the prompt is one
batch, n_threads = n_threads_batch = N, its defaults otherwise (mmap, F16 KV cache).
transformers (PyTorch, fp32) dequantizes the file with its own GGUF loader (an independent
implementation of the same weights), logits_to_keep=1 for the prompt, a DynamicCache,
torch.set_num_threads(N), under inference_mode.

Each peer runs in its own process (this script, --child) and its peak resident memory is the
kernel's ru_maxrss of that process (os.wait4): torch loaded for transformers does not count
against llama.cpp, and each Python peer's figure includes its interpreter and imports. The greedy
tokens are compared with qkv float32's: the length of the common prefix (after a near-tie goes the
other way, each side continues its own text and later positions mean nothing).

Needs the venv of bench/setup_torch_venv.sh (torch, transformers, gguf, llama-cpp-python built
with GGML_NATIVE=OFF): see bench/README.md.
"""

import argparse
import ctypes
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

PEERS = ("llama.cpp", "transformers")
# Where bench/setup_torch_venv.sh records the llama-cpp-python version and its CMake switches.
LLAMA_BUILD_NOTE = os.path.join(sys.prefix, "llama-cpp-build.txt")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def default_gguf():
    home = os.environ.get("QKV_HOME", os.path.expanduser("~/.cache/qkv"))
    return os.path.join(home, "models", "SmolLM2-135M-Instruct",
                        "SmolLM2-135M-Instruct.Q4_1.gguf")


def run_measured(cmd, stdin_text=""):
    """Runs cmd to its end: (exit code, stdout, peak resident bytes of that process).

    os.wait4 gives the rusage of this one child, where RUSAGE_CHILDREN would be the largest of
    all the children so far."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(stdin_text)
    p.stdin.close()
    out = p.stdout.read()
    p.stdout.close()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return p.returncode, out, usage.ru_maxrss * 1024  # Linux: KiB


# ---- qkv ----------------------------------------------------------------------------------------

def qkv_weight_paths(qkv):
    """["file", "float32"] when `qkv bench model` has --weights, else [None]."""
    try:
        p = subprocess.run([qkv, "bench", "model", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        sys.exit(f"compare_llm: cannot run {qkv}: {e.strerror} (build it, or pass --qkv PATH)")
    if p.returncode != 0:
        sys.exit(f"compare_llm: {qkv} bench model --help exited with {p.returncode}")
    return ["file", "float32"] if "--weights" in p.stdout else [None]


def run_qkv(args, weights):
    cmd = [args.qkv, "bench", "model", "--model", args.gguf, "--json", "--threads",
           str(args.threads)]
    if weights:
        cmd += ["--weights", weights]
    if args.quick:
        cmd.append("--quick")
    if args.repeats:
        cmd += ["--repeats", str(args.repeats)]
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    rc, out, peak = run_measured(cmd)
    if rc != 0:
        sys.exit(f"compare_llm: {args.qkv} exited with {rc}")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(rows) != 2 or "prompt_ids" not in rows[0] or "generated_ids" not in rows[1]:
        sys.exit("compare_llm: expected a prompt row and a decode row from " + " ".join(cmd))
    prompt_row, decode_row = rows
    ran = decode_row.get("weights", weights)  # the row says which path ran, when it can
    return {
        "peer": f"qkv ({ran})" if ran else "qkv",
        "weights": ran,
        "prompt_s": prompt_row["median_ms"] / 1e3,
        "decode_s": decode_row["median_ms"] / 1e3,
        "ids": [decode_row["first_id"]] + decode_row["generated_ids"],
        "peak_rss_bytes": peak,
        "resident_bytes": decode_row.get("rss_bytes", prompt_row.get("rss_bytes")),
        "weight_bytes": decode_row.get("weight_bytes"),
        "int8_vs_float32": decode_row.get("int8_vs_float32"),
        "prompt_case": prompt_row["case"],
        "decode_case": decode_row["case"],
        "prompt_ids": prompt_row["prompt_ids"],
        "runs": decode_row.get("runs"),
    }


# ---- the peers, each in a child process ---------------------------------------------------------

def resident_now():
    """This process's resident bytes now (VmRSS): the interpreter and its imports."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def timed_runs(generate, job):
    """A short warm-up, then job['repeats'] runs: median prompt and decode seconds, first ids."""
    generate(4)
    runs = []
    for i in range(job["repeats"]):
        log(f"{job['peer']}: run {i + 1} of {job['repeats']}")
        runs.append(generate(job["new_tokens"]))
    return {"prompt_s": statistics.median(r[0] for r in runs),
            "decode_s": statistics.median(r[1] for r in runs),
            "ids": runs[0][2]}


def child_llama_cpp(job):
    import llama_cpp as L
    import numpy as np

    host = resident_now()
    # llama.cpp logs every tensor and buffer at load on stderr; this callback drops them. (It
    # must outlive the model, hence kept in a local for the whole function.)
    quiet = L.llama_log_callback(lambda level, text, user_data: None)
    L.llama_log_set(quiet, ctypes.c_void_p())
    L.llama_backend_init()
    model = L.llama_model_load_from_file(job["gguf"].encode(), L.llama_model_default_params())
    if not model:
        sys.exit(f"compare_llm: llama.cpp could not load {job['gguf']}")
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    prompt = job["prompt_ids"]
    n = len(prompt)
    cp = L.llama_context_default_params()
    cp.n_ctx = (n + job["new_tokens"] + 64 + 255) // 256 * 256
    # One batch (and one micro-batch) holds the whole prompt: one evaluation, as qkv's one pass.
    cp.n_batch = cp.n_ubatch = max(512, n)
    cp.n_threads = cp.n_threads_batch = job["threads"]
    cp.no_perf = True
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit(f"compare_llm: llama.cpp could not make a context of {cp.n_ctx} tokens")
    memory = L.llama_get_memory(ctx)
    prompt_tokens = (L.llama_token * n)(*prompt)
    one = (L.llama_token * 1)()

    def evaluate(tokens, count):
        # llama_batch_get_one leaves batch.logits NULL: only the last position's logits are kept.
        rc = L.llama_decode(ctx, L.llama_batch_get_one(tokens, count))
        if rc != 0:
            sys.exit(f"compare_llm: llama_decode returned {rc} on a batch of {count}")
        logits = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        return int(logits.argmax())

    def generate(new_tokens):
        L.llama_memory_clear(memory, True)  # an empty cache: the prompt starts at position 0
        t0 = time.perf_counter()
        ids = [evaluate(prompt_tokens, n)]
        t1 = time.perf_counter()
        for _ in range(new_tokens):
            one[0] = ids[-1]
            ids.append(evaluate(one, 1))
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, ids

    result = timed_runs(generate, job)
    build = ""
    if os.path.isfile(LLAMA_BUILD_NOTE):
        with open(LLAMA_BUILD_NOTE) as f:
            build = f.read().strip()
    result.update({
        "version": f"llama-cpp-python {L.__version__}",
        "build": build or f"llama-cpp-python {L.__version__}, not built by "
                          f"bench/setup_torch_venv.sh (no {LLAMA_BUILD_NOTE}): switches unknown",
        "system_info": L.llama_print_system_info().decode().strip(),
        "n_ctx": cp.n_ctx, "n_batch": cp.n_batch, "host_rss_bytes": host,
    })
    L.llama_free(ctx)
    L.llama_model_free(model)
    del quiet
    return result


def child_transformers(job):
    os.environ["TQDM_DISABLE"] = "1"  # the GGUF loader's bar, one tick a tensor, on stderr
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, DynamicCache

    transformers.utils.logging.disable_progress_bar()  # one bar per tensor at load otherwise

    host = resident_now()
    torch.set_num_threads(job["threads"])
    gguf = job["gguf"]
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf),
                                                 gguf_file=os.path.basename(gguf),
                                                 dtype=torch.float32)
    model.eval()
    prompt = job["prompt_ids"]

    def generate(new_tokens):
        with torch.inference_mode():
            t0 = time.perf_counter()
            cache = DynamicCache()
            out = model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True,
                        logits_to_keep=1)
            ids = [int(out.logits[0, -1].argmax())]
            t1 = time.perf_counter()
            for _ in range(new_tokens):
                out = model(input_ids=torch.tensor([[ids[-1]]]), past_key_values=cache,
                            use_cache=True)
                ids.append(int(out.logits[0, -1].argmax()))
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1, ids

    result = timed_runs(generate, job)
    result.update({"version": f"transformers {transformers.__version__}, torch "
                              f"{torch.__version__}, fp32", "host_rss_bytes": host})
    return result


CHILDREN = {"llama.cpp": child_llama_cpp, "transformers": child_transformers}
MODULES = {"llama.cpp": "llama_cpp", "transformers": "transformers"}


def run_peer(peer, job):
    log(f"{peer}: loading {os.path.basename(job['gguf'])}")
    rc, out, peak = run_measured([sys.executable, os.path.abspath(__file__), "--child", peer],
                                 json.dumps(dict(job, peer=peer)))
    if rc != 0:
        sys.exit(f"compare_llm: the {peer} run exited with {rc}")
    result = json.loads(out.strip().splitlines()[-1])
    result.update({"peer": peer, "peak_rss_bytes": peak})
    return result


# ---- the table ----------------------------------------------------------------------------------

def machine():
    """(CPU model, ISA as issue 30 quotes it, whether the CPU has AMX tiles)."""
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
    return model, isa, "amx_tile" in flags


def same_prefix(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default="./build/qkv", help="the qkv binary (default ./build/qkv)")
    ap.add_argument("--gguf", default=default_gguf(),
                    help="the model file (default: SmolLM2-135M-Instruct in $QKV_HOME/models)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of every peer (default: every core)")
    ap.add_argument("--quick", action="store_true",
                    help="qkv's --quick sizes, one run: a smoke test")
    ap.add_argument("--repeats", type=int, default=0, help="timed runs (default 3, 1 with --quick)")
    ap.add_argument("--skip", action="append", default=[], choices=PEERS,
                    help="leave a peer out (repeatable)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--child", choices=PEERS, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:  # one peer, its job on stdin, its result as one JSON line on stdout
        job = json.load(sys.stdin)
        job.setdefault("peer", args.child)
        print(json.dumps(CHILDREN[args.child](job)))
        return

    if not os.path.isfile(args.gguf):
        sys.exit(f"compare_llm: {args.gguf} is not there; run scripts/fetch_model smollm2")
    peers = [p for p in PEERS if p not in args.skip]
    for peer in peers:  # before qkv's minute, not after it
        if importlib.util.find_spec(MODULES[peer]) is None:
            sys.exit(f"compare_llm: {sys.executable} has no {MODULES[peer]}: run it with the venv "
                     f"of bench/setup_torch_venv.sh (which installs it), or --skip {peer}")
    repeats = args.repeats or (1 if args.quick else 3)

    load_before = os.getloadavg()[0]
    rows = [run_qkv(args, w) for w in qkv_weight_paths(args.qkv)]
    first = rows[0]
    job = {"gguf": args.gguf, "prompt_ids": first["prompt_ids"], "threads": args.threads,
           "new_tokens": len(first["ids"]) - 1, "repeats": repeats}
    rows += [run_peer(p, job) for p in peers]

    # Speed is held against qkv on the file's blocks; tokens against qkv's exact float32 path.
    speed_ref = next((r for r in rows if r.get("weights") == "file"), first)
    token_ref = next((r for r in rows if r.get("weights") == "float32"), first)
    n_prompt, n_new = len(job["prompt_ids"]), job["new_tokens"]
    for r in rows:
        r["prompt_tokens_per_s"] = n_prompt / r["prompt_s"]
        r["decode_tokens_per_s"] = n_new / r["decode_s"]
        r["same_greedy_tokens"] = same_prefix(r["ids"], token_ref["ids"])
    # Other work on the cores slows llama.cpp most: its threads spin at each barrier and a
    # preempted one stalls the rest (measured here: 2 threads decode at 40 tokens/s beside a
    # compiler, 1 thread at 138). Each table says what the load was.
    load = (load_before, os.getloadavg()[0])
    cpu, isa, amx = machine()
    size = os.path.getsize(args.gguf)
    cases = [(first["prompt_case"], n_prompt, "prompt"), (first["decode_case"], n_new, "decode")]

    if args.json:
        for case, n, key in cases:
            print(json.dumps({
                "case": case, "tokens": n, "threads": args.threads, "repeats": repeats,
                "cpu": cpu, "isa": isa, "amx_tile": amx, "gguf": args.gguf, "gguf_bytes": size,
                "load_average_1min": load, "ratio_of": speed_ref["peer"],
                "peers": [{
                    "peer": r["peer"], "tokens_per_s": r[f"{key}_tokens_per_s"],
                    # ratio_of's tokens/s over this peer's: > 1, qkv is ahead
                    "ratio": r[f"{key}_s"] / speed_ref[f"{key}_s"],
                    "same_greedy_tokens": r["same_greedy_tokens"], "of": len(token_ref["ids"]),
                    "peak_rss_bytes": r["peak_rss_bytes"], "greedy_ids": r["ids"],
                    **{k: r[k] for k in ("weights", "resident_bytes", "weight_bytes",
                                         "int8_vs_float32", "version", "build",
                                         "system_info", "host_rss_bytes") if r.get(k)},
                } for r in rows]}))
        return

    mb = 1e6
    print(f"{cpu}, {isa}, {'amx_tile' if amx else 'no amx_tile'}; {args.threads} threads; "
          f"{os.path.basename(args.gguf)}, {size / mb:.1f} MB; median of {repeats} after a "
          f"warm-up; load average (1 min) {load[0]:.1f} before, {load[1]:.1f} after")
    for r in rows:
        # The build note starts with the version; a llama_cpp not built by our script has none.
        for key in ("build", "version"):
            if r.get(key):
                print(f"  {r['peer']}: {r[key]}")
                break
        if r.get("system_info"):
            print(f"    {r['system_info']}")
    ref = speed_ref["peer"]
    heads = ["peer", f"{cases[0][0]} tok/s", f"{cases[1][0]} tok/s", f"{ref} / peer",
             f"greedy = {token_ref['peer']}", "peak RSS MB"]
    table = [heads]
    for r in rows:
        ratios = (f"{r['prompt_s'] / speed_ref['prompt_s']:.2f}× "
                  f"{r['decode_s'] / speed_ref['decode_s']:.2f}×")
        same = ("(the reference)" if r is token_ref else
                f"{r['same_greedy_tokens']} of {len(token_ref['ids'])}")
        table.append([r["peer"], f"{r['prompt_tokens_per_s']:.1f}",
                      f"{r['decode_tokens_per_s']:.1f}", ratios, same,
                      f"{r['peak_rss_bytes'] / mb:.0f}"])
    widths = [max(len(row[i]) for row in table) for i in range(len(heads))]
    for row in table:
        print(" | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))))
    print(f"ratios: prompt, decode; > 1: {ref} is faster. greedy: the common prefix of the "
          f"{len(token_ref['ids'])} greedy tokens.\npeak RSS: the whole process (os.wait4)")
    # Which side a difference comes from: the peers against each other, qkv's reference aside.
    others = [r for r in rows if r is not token_ref]
    for i, a in enumerate(others):
        for b in others[i + 1:]:
            print(f"  greedy: {a['peer']} and {b['peer']} agree on the first "
                  f"{same_prefix(a['ids'], b['ids'])} of {len(token_ref['ids'])}")
    for r in rows:
        if r.get("resident_bytes"):
            print(f"  {r['peer']} counts its own resident memory at "
                  f"{r['resident_bytes'] / mb:.0f} MB after its runs"
                  + (f" (its weights {r['weight_bytes'] / mb:.0f} MB)" if r.get("weight_bytes")
                     else ""))
        c = r.get("int8_vs_float32")
        if c:  # qkv's own comparison of its two decodes, on float32's tokens fed to both
            print(f"  {r['peer']}: int8 decode against float32 decode on float32's tokens: "
                  f"{c['same_argmax_on_float32_tokens']} of {c['steps']} next tokens the same, "
                  f"logits within {c['max_logit_diff']:.3g} (largest |logit| "
                  f"{c['largest_logit']:.3g}); free-running, {c['same_greedy_tokens']} of "
                  f"{c['tokens']} greedy tokens equal at their position")
        if r.get("host_rss_bytes"):
            print(f"  {r['peer']}: {r['host_rss_bytes'] / mb:.0f} MB of it is Python and its "
                  "imports, before the model")

if __name__ == "__main__":
    main()
