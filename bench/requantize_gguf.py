#!/usr/bin/env python3
"""A GGUF file requantized to another type by llama.cpp itself (llama_model_quantize through
llama-cpp-python), for the benchmarks of qkv's kernels on each ggml type:

    ~/.cache/qkv/torch-venv/bin/python bench/requantize_gguf.py IN.gguf Q5_K_M [--out OUT.gguf]

TYPE is one of llama.cpp's file types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_M, Q4_K_S, Q5_K_M,
Q5_K_S, Q6_K, F16, BF16. The output keeps the input's metadata and tokenizer; llama.cpp picks each
tensor's type by its recipe (llama-quant.cpp: Q6_K for the output and some attn_v/ffn_down in
the _M mixes; a type whose 256-value super-blocks do not divide a row falls back to a legacy
type). A quantized input is dequantized first (allow_requantize): the weights are then the input's
rounded again, which is fine for a speed benchmark and for comparing two engines on the same
file, not for judging the type's quality.

Needs llama-cpp-python in the bench venv (bench/setup_torch_venv.sh). Never commit the output.
"""

import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("type", help="Q4_K_M, Q5_K_M, Q6_K, Q8_0, ... (llama.cpp's LLAMA_FTYPE_MOSTLY_*)")
    ap.add_argument("--out", help="default: IN's name with the type in place of its last part")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        sys.exit("requantize_gguf: llama_cpp is not importable; run it with the bench venv's "
                 "python (bench/setup_torch_venv.sh installs llama-cpp-python)")
    ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + args.type.upper(), None)
    if ftype is None:
        sys.exit(f"requantize_gguf: type {args.type!r} is not one llama.cpp writes; expected "
                 "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, F16 or BF16")
    if not os.path.isfile(args.input):
        sys.exit(f"requantize_gguf: {args.input}: no such file")
    out = args.out or os.path.join(
        os.path.dirname(args.input),
        os.path.basename(args.input).rsplit(".", 2)[0] + "." + args.type.upper() + ".gguf")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = args.threads
    params.allow_requantize = True
    start = time.time()
    rc = llama_cpp.llama_model_quantize(args.input.encode(), out.encode(), params)
    if rc != 0:
        sys.exit(f"requantize_gguf: llama_model_quantize returned {rc}")
    print(f"{out}: {os.path.getsize(out) / 1e6:.1f} MB in {time.time() - start:.1f} s",
          file=sys.stderr)
    print(out)


if __name__ == "__main__":
    main()
