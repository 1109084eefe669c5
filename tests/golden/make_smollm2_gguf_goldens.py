"""Writes tests/golden/smollm2/gguf_tensors.json: what the `gguf` package (llama.cpp's own Python
reader, PyPI) reads from SmolLM2-135M-Instruct.Q4_1.gguf — the metadata qkv relies on, and for a
few tensors of every stored type (Q8_0, Q4_1, F32) their shape and the float64 sum, sum of squares
and first and last values after dequantization. tests/core/gguf_test.cpp compares qkv's reader.

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_smollm2_gguf_goldens.py

Needs numpy and gguf (pip install gguf) in a venv outside the repository; `make test` never runs
it. The model comes from scripts/fetch_model (QKV_HOME, default ~/.cache/qkv).
"""
import json
import os
import sys

import gguf
import numpy as np

HOME = os.environ.get("QKV_HOME", os.path.expanduser("~/.cache/qkv"))
MODEL = os.path.join(HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2/gguf_tensors.json")
TENSORS = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
           "blk.0.ffn_down.weight", "blk.29.attn_output.weight", "blk.0.attn_norm.weight",
           "output_norm.weight"]
KEYS = ["general.architecture", "llama.block_count", "llama.context_length",
        "llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
        "llama.attention.head_count_kv", "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon", "llama.rope.dimension_count",
        "llama.vocab_size", "tokenizer.ggml.model", "tokenizer.ggml.pre",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.add_bos_token"]


def main():
    reader = gguf.GGUFReader(MODEL)
    meta = {k: reader.fields[k].contents() for k in KEYS}
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    meta["tokens: count, first, last"] = [len(tokens), tokens[0], tokens[-1]]
    meta["merges: count, first, last"] = [len(merges), merges[0], merges[-1]]
    tensors = {}
    for t in reader.tensors:
        if t.name not in TENSORS:
            continue
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1)
        tensors[t.name] = {
            "type": t.tensor_type.name,
            "shape": [int(n) for n in reversed(t.shape)],  # C order, as qkv gives it
            "sum": float(x.sum()),
            "sum_squares": float((x * x).sum()),
            "first": [float(v) for v in x[:8]],
            "last": [float(v) for v in x[-8:]],
        }
    out = {"model": os.path.basename(MODEL), "tensor_count": len(reader.tensors),
           "types": {}, "metadata": meta, "tensors": tensors}
    for t in reader.tensors:
        out["types"][t.tensor_type.name] = out["types"].get(t.tensor_type.name, 0) + 1
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}: {len(tensors)} tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
