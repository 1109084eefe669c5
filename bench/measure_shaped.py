"""What `qkv explain` and `qkv generate` cost on a GGUF file: wall time, CPU time, peak RSS.

  ~/.cache/qkv/torch-venv/bin/python bench/measure_shaped.py FILE.gguf [FILE.gguf ...]
      [--qkv build/qkv] [--prompt TEXT] [--repeats R] [--bench] [--json]

Per file: its parameters (gguf-py's element counts; a tied embedding once), the prompt's tokens
as qkv counts them (the number its --memory-limit refusal names), then under /usr/bin/time -v:
`qkv explain --model FILE PROMPT`; `qkv generate --max-tokens 1 "The"` (the load, with one
token's pass); `qkv generate --max-tokens 20 PROMPT`; with --bench, `qkv bench model --quick`
(prompt-128 and decode-32 tokens/s). Each timed command runs R times (default 1); the run of
median wall time is kept, with every run's wall time and the load average (1 min) before it:
these 2 cores are shared, so a number taken at load 5 is not one taken at load 1.
Used for bench/README.md's "A Llama 3.2 1B-shaped file" (make_shaped_gguf.py writes the file).
"""

import argparse
import json
import os
import re
import subprocess
import sys

import gguf

PROMPT = "The people of the world need more water, food and light to live."


def parameters(path):
    return sum(int(t.n_elements) for t in gguf.GGUFReader(path).tensors)


def timed(cmd):
    """(wall s, user+sys s, peak RSS bytes, rc, stdout+stderr tail, load average before)."""
    load = os.getloadavg()[0]
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    err = r.stderr

    def field(name):
        return re.search(re.escape(name) + r": (.*)", err).group(1).strip()

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    rss = int(field("Maximum resident set size (kbytes)")) * 1024
    tail = (r.stdout + err.split("\tCommand being timed")[0])[-400:]
    return dict(wall_s=round(seconds, 2), cpu_s=round(cpu, 2), peak_rss_gib=round(rss / 2**30, 3),
                rc=r.returncode, load=round(load, 2), tail=tail.strip())


def timed_median(cmd, repeats):
    runs = [timed(cmd) for _ in range(repeats)]
    median = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    return dict(median, walls=[r["wall_s"] for r in runs], loads=[r["load"] for r in runs])


def prompt_tokens(qkv, path, prompt):
    r = subprocess.run([qkv, "explain", "--model", path, "--memory-limit", "1K", prompt],
                       capture_output=True, text=True)
    m = re.search(r"explaining ([\d,]+) tokens.*needs about ([\d.]+ \w+)", r.stderr)
    return (int(m.group(1).replace(",", "")), m.group(2)) if m else (None, r.stderr.strip())


def bench(qkv, path):
    load = os.getloadavg()[0]
    r = subprocess.run([qkv, "bench", "model", "--model", path, "--quick", "--json"],
                       capture_output=True, text=True)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return dict(load=round(load, 2), rows=rows, rc=r.returncode, err=r.stderr.strip()[-300:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--qkv", default="build/qkv")
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for path in args.files:
        tokens, needs = prompt_tokens(args.qkv, path, args.prompt)
        out = dict(file=os.path.basename(path), parameters=parameters(path), tokens=tokens,
                   explain_needs=needs)
        r = args.repeats
        out["explain"] = timed_median([args.qkv, "explain", "--model", path, args.prompt], r)
        out["load"] = timed_median(
            [args.qkv, "generate", "--model", path, "--max-tokens", "1", "The"], r)
        out["generate20"] = timed_median(
            [args.qkv, "generate", "--model", path, "--max-tokens", "20", args.prompt], r)
        if args.bench:
            out["bench"] = bench(args.qkv, path)
        if args.json:
            print(json.dumps(out), flush=True)
            continue
        e, l, g = out["explain"], out["load"], out["generate20"]
        print(f"{out['file']}: {out['parameters']:,} parameters, {tokens} tokens "
              f"(explain needs about {needs})\n"
              f"  explain   {e['wall_s']} s wall, {e['cpu_s']} s cpu, {e['peak_rss_gib']} GiB "
              f"(rc {e['rc']}; walls {e['walls']} at loads {e['loads']})\n"
              f"  load      {l['wall_s']} s wall, {l['cpu_s']} s cpu, {l['peak_rss_gib']} GiB "
              f"(rc {l['rc']}; walls {l['walls']} at loads {l['loads']})\n"
              f"  gen 20    {g['wall_s']} s wall, {g['cpu_s']} s cpu (rc {g['rc']}; walls "
              f"{g['walls']} at loads {g['loads']})", flush=True)
        if e["rc"]:
            print("  explain failed:", e["tail"][-200:])
        for row in out.get("bench", {}).get("rows", []):
            print("  bench", json.dumps(row))


if __name__ == "__main__":
    sys.exit(main())
