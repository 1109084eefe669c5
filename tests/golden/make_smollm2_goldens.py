"""Writes tests/golden/smollm2/forward.json: SmolLM2-135M-Instruct run by Hugging Face transformers
(its own GGUF loader dequantizes the same Q4_1 file to float32, and its own Llama runs it, eager
attention) on a few token sequences — an implementation independent of qkv's. Per text: the ids,
the logits of every position at a fixed set of vocabulary ids (each position's top 10 and 10 more
spread over the vocabulary), and the attention weights of three layers, every head.

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_smollm2_goldens.py

Needs torch, transformers and gguf in a venv outside the repository; `make test` never runs it.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

HOME = os.environ.get("QKV_HOME", os.path.expanduser("~/.cache/qkv"))
DIR = os.path.join(HOME, "models/SmolLM2-135M-Instruct")
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2/forward.json")
TEXTS = ["The capital of France is",
         "The animal didn't cross the street because it was too tired",
         "1 2 3 4 5 6"]
LAYERS = [0, 14, 29]


def main():
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(DIR, gguf_file=FILE)
    model = AutoModelForCausalLM.from_pretrained(DIR, gguf_file=FILE, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    spread = list(range(0, 49152, 49152 // 10))[:10]
    out = {"model": FILE, "layers": LAYERS, "texts": []}
    for text in TEXTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            r = model(torch.tensor([ids]), output_attentions=True)
        logits = r.logits[0].double()
        positions = []
        for p in range(len(ids)):
            top = torch.topk(logits[p], 10).indices.tolist()
            vocab = top + [v for v in spread if v not in top]
            positions.append({"ids": vocab, "logits": [logits[p, v].item() for v in vocab]})
        attention = {str(l): r.attentions[l][0].double().tolist() for l in LAYERS}
        out["texts"].append({"text": text, "ids": ids, "positions": positions,
                             "attention": attention})
        print(f"{text!r}: next {tokenizer.decode([int(logits[-1].argmax())])!r}", file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
