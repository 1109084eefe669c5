#!/usr/bin/env python3
"""transformers (PyTorch, CPU, fp32) side by side with `qkv bench model --model smollm2`.

    compare_llm.py [--qkv ./build/qkv] [--threads N] [--quick] [--repeats R] [--json]

Runs `qkv bench model --model smollm2 --json --threads N` first. Its rows carry the prompt's token
ids and the ids qkv generated, so transformers gets exactly the same work: the same GGUF file,
dequantized to fp32 by transformers' own GGUF loader (an independent implementation of the same
weights), the same prompt ids and the same threads (torch.set_num_threads). Then, as qkv measures:

  prompt-512   one forward pass over the prompt with an empty cache, the last position's logits
               alone (logits_to_keep=1), and the argmax: the time to the first generated token
  decode-128   128 further tokens, greedy, one forward a token with the DynamicCache

under torch.inference_mode(); a warm-up, then the median of --repeats. It checks that
transformers' greedy tokens are qkv's (they should agree for most or all of them: fp32 on both
sides, but different summation orders can flip a near-tie) and prints tokens/s of both and
qkv/transformers. llama.cpp is not in Debian 12's packages, so it is not run here.

Needs the venv of bench/setup_torch_venv.sh (torch, transformers, gguf): see bench/README.md.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def default_gguf():
    home = os.environ.get("QKV_HOME", os.path.expanduser("~/.cache/qkv"))
    return os.path.join(home, "models", "SmolLM2-135M-Instruct",
                        "SmolLM2-135M-Instruct.Q4_1.gguf")


def run_qkv(args):
    cmd = [args.qkv, "bench", "model", "--model", args.gguf, "--json", "--threads",
           str(args.threads)]
    if args.quick:
        cmd.append("--quick")
    if args.repeats:
        cmd += ["--repeats", str(args.repeats)]
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_llm: {args.qkv} exited with {p.returncode}")
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if len(rows) != 2 or "prompt_ids" not in rows[0] or "generated_ids" not in rows[1]:
        sys.exit("compare_llm: expected a prompt row and a decode row from " + " ".join(cmd))
    return rows[0], rows[1]


def load_transformers(gguf, threads):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    log(f"loading {gguf} with transformers (dequantized to fp32)")
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf),
                                                 gguf_file=os.path.basename(gguf),
                                                 dtype=torch.float32)
    model.eval()
    return torch, model


def generate(torch, model, prompt, new_tokens):
    """Greedy, as qkv: returns (seconds to the first token, seconds for the rest, ids)."""
    from transformers import DynamicCache

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default="./build/qkv", help="the qkv binary (default ./build/qkv)")
    ap.add_argument("--gguf", default=default_gguf(),
                    help="the model file (default: SmolLM2-135M-Instruct in $QKV_HOME/models)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of both sides (default: every core)")
    ap.add_argument("--quick", action="store_true", help="qkv's --quick sizes, one run: a smoke test")
    ap.add_argument("--repeats", type=int, default=0, help="timed runs (default 3, 1 with --quick)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    args = ap.parse_args()
    if not os.path.isfile(args.gguf):
        sys.exit(f"compare_llm: {args.gguf} is not there; run scripts/fetch_model smollm2")
    repeats = args.repeats or (1 if args.quick else 3)

    prompt_row, decode_row = run_qkv(args)
    prompt = prompt_row["prompt_ids"]
    qkv_ids = [decode_row["first_id"]] + decode_row["generated_ids"]
    new_tokens = len(decode_row["generated_ids"])

    torch, model = load_transformers(args.gguf, args.threads)
    generate(torch, model, prompt, 4)  # warm-up
    runs = []
    for i in range(repeats):
        log(f"transformers: run {i + 1} of {repeats}")
        runs.append(generate(torch, model, prompt, new_tokens))
    tf_prompt = statistics.median(r[0] for r in runs)
    tf_decode = statistics.median(r[1] for r in runs)
    tf_ids = runs[0][2]
    agree = next((i for i, (a, b) in enumerate(zip(qkv_ids, tf_ids)) if a != b), len(qkv_ids))

    rows = [
        (prompt_row["case"], len(prompt), prompt_row["median_ms"] / 1e3, tf_prompt),
        (decode_row["case"], new_tokens, decode_row["median_ms"] / 1e3, tf_decode),
    ]
    if args.json:
        for case, n, q, t in rows:
            print(json.dumps({"case": case, "tokens": n, "threads": args.threads,
                              "qkv_tokens_per_s": n / q, "transformers_tokens_per_s": n / t,
                              "ratio": t / q, "torch": torch.__version__,
                              "same_greedy_tokens": agree, "of": len(qkv_ids)}))
        return
    print(f"SmolLM2-135M-Instruct, fp32, {args.threads} threads, median of {repeats}: qkv vs "
          f"transformers (torch {torch.__version__})")
    print(f"{'case':<12} {'tokens':>6} {'qkv tok/s':>10} {'transformers':>13} {'qkv/tf':>7}")
    for case, n, q, t in rows:
        print(f"{case:<12} {n:>6} {n / q:>10.1f} {n / t:>13.1f} {t / q:>6.2f}×")
    print(f"greedy tokens: the first {agree} of {len(qkv_ids)} agree"
          + ("" if agree == len(qkv_ids) else
             " (then a near-tie went the other way; each side continued its own text)"))


if __name__ == "__main__":
    main()
