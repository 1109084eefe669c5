#!/usr/bin/env python3
"""Writes tests/golden/smollm2/chat_prompts.json: the prompts Hugging Face's tokenizer makes of three
conversations with SmolLM2-135M-Instruct's chat template, and their token ids, for
CausalLM::chat_prompt (src/models/text/chat_template.cpp), which reads the same template but runs no
Jinja.

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_smollm2_chat_goldens.py

The tokenizer is the one make_smollm2_token_goldens.py builds: transformers' from the GGUF file
(vocabulary, merges, control tokens and tokenizer.chat_template, all from its metadata), with
SmolLM2's own pre-tokenizer put back. The text is
apply_chat_template(messages, add_generation_prompt=True, tokenize=False); the ids are that
tokenizer's for the text, checked to be what apply_chat_template(..., tokenize=True) gives and to
hold <|im_start|> and <|im_end|> as the single ids 1 and 2. Each case also holds the model's
greedy answer, GREEDY_TOKENS tokens of it: transformers' own Llama run on the GGUF's weights
(dequantized to float32, as make_smollm2_goldens.py runs it), with the smallest margin between the
most likely logit and the next one at each step (relative to the step's largest |logit|), so that
a test can tell a near tie from a difference. `make test` only reads the JSON.
"""

import os

import tokenizers
import torch
import transformers
from transformers import AutoModelForCausalLM

from make_smollm2_token_goldens import GGUF, MODEL, load_tokenizers, qkv_home, write_cases_json

GREEDY_TOKENS = 8

CONVERSATIONS = [
    # one user message: the template adds its default system message
    [{"role": "user", "content": "What is the capital of France?"}],
    # a system message of our own replaces the default
    [{"role": "system", "content": "You are a pirate. Answer in one short sentence."},
     {"role": "user", "content": "Where is the treasure buried?"}],
    # non-ASCII: accents, CJK, an emoji ZWJ sequence, digits; the default system message again
    [{"role": "user", "content": "Café ou thé ☕? 日本語で答えて 👩\u200d💻 — 2024年"}],
]


def greedy(model, ids):
    """GREEDY_TOKENS most likely tokens one after the other (no cache: each step runs the whole
    sequence), and at each step the margin between the two most likely logits relative to the
    step's largest |logit| (the scale of llama_test.cpp's 1e-3 bound)."""
    ids, new, margins = list(ids), [], []
    with torch.no_grad():
        for _ in range(GREEDY_TOKENS):
            logits = model(torch.tensor([ids])).logits[0, -1].double()
            top = torch.topk(logits, 2)
            margins.append(round(((top.values[0] - top.values[1]) / logits.abs().max()).item(), 6))
            nxt = int(top.indices[0])
            if nxt == 2:  # <|im_end|>, the model's end of its turn (tokenizer.ggml.eos_token_id)
                break
            new.append(nxt)
            ids.append(nxt)
    return new, margins


def main():
    tok, gguf_loaded = load_tokenizers()
    model = AutoModelForCausalLM.from_pretrained(
        os.path.join(qkv_home(), "models", MODEL), gguf_file=GGUF, torch_dtype=torch.float32)
    model.eval()
    template = tok.chat_template
    assert template and "<|im_start|>" in template, "the GGUF's tokenizer.chat_template is missing"
    start, end = tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    assert (start, end) == (1, 2), (start, end)

    cases = []
    for messages in CONVERSATIONS:
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok.encode(text, add_special_tokens=False)
        applied = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        applied = applied["input_ids"] if hasattr(applied, "keys") else applied
        assert applied == ids, (messages, applied, ids)
        # Every marker the text writes is one id.
        assert ids.count(start) == text.count("<|im_start|>") and ids.count(end) == text.count(
            "<|im_end|>"), (text, ids)
        answer, margins = greedy(model, ids)
        case = {"messages": messages, "text": text, "ids": ids, "greedy_ids": answer,
                "greedy_text": tok.decode(answer), "greedy_margins": margins}
        loader_ids = gguf_loaded.encode(text, add_special_tokens=False)
        if loader_ids != ids:
            case["transformers_gguf_ids"] = loader_ids
        cases.append(case)
    assert cases[0]["text"].startswith("<|im_start|>system\n")
    assert "SmolLM" not in cases[1]["text"]

    golden = {
        "model": f"{MODEL}/{GGUF}",
        "made_by": f"tests/golden/make_smollm2_chat_goldens.py (transformers "
                   f"{transformers.__version__}, tokenizers {tokenizers.__version__})",
        "call": "apply_chat_template(messages, add_generation_prompt=True, tokenize=False)",
        "chat_template": template,
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2", "chat_prompts.json")
    write_cases_json(path, golden)  # one case a line, as token_ids.json
    print(f"wrote {path}: {len(cases)} conversations")


if __name__ == "__main__":
    main()
