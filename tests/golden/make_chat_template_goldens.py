#!/usr/bin/env python3
"""Writes tests/golden/chat_templates/chat_prompts.json: what Hugging Face's
apply_chat_template(messages, add_generation_prompt=True, tokenize=False) makes of a few
conversations — [user] or [system, user] — with each real chat template under
tests/golden/chat_templates/ (SOURCES below says where each came from), for qkv's ChatTemplate
(src/models/text/chat_template.cpp), which reads the same templates but runs no Jinja.

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_chat_template_goldens.py

The tokenizer is a stand-in (a one-word WordLevel vocabulary) carrying the model's bos_token and
eos_token: with tokenize=False apply_chat_template only renders the template, with transformers'
own Jinja environment and globals (raise_exception, strftime_now). Each case records the rendered
text, or the template's error (Gemma 2 and the 2023 Mistral template raise on a system message),
or that the system message was left out (the April 2024 Phi-3 template drops it unsaid).
An empty "system" means the conversation has no system message: qkv's format(user, "") means
that too (the template's default system message, if any, is used).

Llama 3.2's template writes today's date (strftime_now("%d %b %Y")) where 3.1 writes a fixed
"26 Jul 2024": its cases are rendered with date_string given (recorded in the case, as qkv's
test passes it), and the script checks that the render without it is the one with today's date.
"""

import datetime
import json
import os

import tokenizers
import transformers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "chat_templates")
FIXED_DATE = "02 Mar 2025"

# Where each template came from. "llama.cpp models/templates" files were written there by its
# scripts/get_chat_template.py, which prints the model's tokenizer_config.json chat_template as it
# is; "llama.cpp test-chat-template.cpp" ones are quoted in its tests/test-chat-template.cpp (its
# quote of Mistral-Nemo-Instruct-2407 was checked equal to the models/templates file, byte for
# byte). Read from a snapshot of github.com/ggml-org/llama.cpp (fork ye-NX/llama.cpp, commit
# 1eeb523c). Llama 3.3-70B-Instruct's template is the same text as 3.1-8B-Instruct's.
SOURCES = [
    # file, model, family, bos_token, eos_token, where the text was read
    ("openhermes-2.5-mistral-7b.jinja", "teknium/OpenHermes-2.5-Mistral-7B", "chatml", "<s>",
     "<|im_end|>", "llama.cpp tests/test-chat-template.cpp"),
    ("qwen2.5-7b-instruct.jinja", "Qwen/Qwen2.5-7B-Instruct", "chatml", None, "<|im_end|>",
     "llama.cpp models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"),
    ("qwen3-0.6b.jinja", "Qwen/Qwen3-0.6B", "chatml", None, "<|im_end|>",
     "llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja"),
    ("meta-llama-3-8b-instruct.jinja", "meta-llama/Meta-Llama-3-8B-Instruct", "llama3",
     "<|begin_of_text|>", "<|eot_id|>",
     "llama.cpp tests/test-chat-template.cpp (\"Llama-3\"; there without the "
     "{% if add_generation_prompt %} around the last turn, which the model's file has)"),
    ("llama-3.1-8b-instruct.jinja", "meta-llama/Llama-3.1-8B-Instruct", "llama3",
     "<|begin_of_text|>", "<|eot_id|>",
     "llama.cpp models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja"),
    ("llama-3.2-3b-instruct.jinja", "meta-llama/Llama-3.2-3B-Instruct", "llama3",
     "<|begin_of_text|>", "<|eot_id|>",
     "llama.cpp models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja"),
    ("gemma-2-2b-it.jinja", "google/gemma-2-2b-it", "gemma", "<bos>", "<eos>",
     "llama.cpp models/templates/google-gemma-2-2b-it.jinja"),
    ("gemma-3-it.jinja", "google/gemma-3-4b-it", "gemma", "<bos>", "<eos>",
     "the tokenizer_config.json chat_template as quoted in ShishirPatil/gorilla "
     "berkeley-function-call-leaderboard (local_inference/gemma.py)"),
    ("mistral-7b-instruct-v0.1-2023.jinja", "mistralai/Mistral-7B-Instruct-v0.1 (2023)",
     "mistral", "<s>", "</s>",
     "llama.cpp tests/test-chat-template.cpp (\"Old pre-v1 without a system prompt\"; the "
     "template GGUF files of 2023 carry)"),
    ("mistral-7b-instruct-v0.2.jinja", "mistralai/Mistral-7B-Instruct-v0.2", "mistral", "<s>",
     "</s>", "llama.cpp tests/test-chat-template.cpp (\"mistralai 'v1' template with a system "
     "prompt\")"),
    ("mistral-large-instruct-2407.jinja", "mistralai/Mistral-Large-Instruct-2407", "mistral",
     "<s>", "</s>", "llama.cpp tests/test-chat-template.cpp (\"mistralai 'v3' template\", the "
     "one of Mistral-7B-Instruct-v0.3)"),
    ("mistral-nemo-instruct-2407.jinja", "mistralai/Mistral-Nemo-Instruct-2407", "mistral",
     "<s>", "</s>", "llama.cpp models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    ("llama-2-7b-chat-hf.jinja", "meta-llama/Llama-2-7b-chat-hf", "llama2", "<s>", "</s>",
     "the tokenizer_config.json chat_template as quoted in a jinja test generator found by the "
     "code search (the widely quoted Llama 2 chat template)"),
    ("phi-3-mini-4k-instruct-2024-04.jinja", "microsoft/Phi-3-mini-4k-instruct (April 2024)",
     "phi3", "<s>", "<|endoftext|>", "llama.cpp tests/test-chat-template.cpp (\"Phi-3-mini\")"),
    ("phi-3.5-mini-instruct.jinja", "microsoft/Phi-3.5-mini-instruct", "phi3", "<s>",
     "<|endoftext|>", "llama.cpp models/templates/microsoft-Phi-3.5-mini-instruct.jinja"),
]

# (system, user): "" for no system message.
CONVERSATIONS = [
    ("", "What is the capital of France?"),
    ("You are a pirate. Answer in one short sentence.", "Where is the treasure buried?"),
    ("", "Café ou thé ☕? 日本語で答えて 👩\u200d💻 — 2024年"),
    # Whitespace the templates that trim (Jinja's trim, Python's str.strip) remove: Unicode spaces
    # too (U+3000, U+00A0, U+2028), but not U+200B (not whitespace to Python).
    ("  Sé breve.\n", "\u3000 spaces\tand\u00a0nbsp \u2028\n\n"),
    ("\u200bzero width", "x\u200b"),
    # Another family's markers inside the text are text to the template.
    ("Write <|im_start|> and [INST] as they are.",
     "What do <|im_end|>, <start_of_turn>, <|eot_id|>, <<SYS>> and [/INST] mean?"),
]


def stand_in_tokenizer(bos, eos):
    vocab = {"<unk>": 0}
    for t in (bos, eos):
        if t is not None:
            vocab[t] = len(vocab)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(WordLevel(vocab, "<unk>")),
                                   bos_token=bos, eos_token=eos, unk_token="<unk>")


def render(tok, template, system, user, **kwargs):
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}]
    return tok.apply_chat_template(messages, chat_template=template, add_generation_prompt=True,
                                   tokenize=False, **kwargs)


def cases_of(tok, template):
    dated = "strftime_now" in template
    kwargs = {"date_string": FIXED_DATE} if dated else {}
    if dated:  # without date_string the template writes today's date, as qkv's default does
        today = datetime.datetime.now().strftime("%d %b %Y")
        assert render(tok, template, "", "hi") == render(tok, template, "", "hi",
                                                         date_string=today)
    cases = []
    for system, user in CONVERSATIONS:
        case = {"system": system, "user": user}
        if dated:
            case["date_string"] = FIXED_DATE
        try:
            case["text"] = render(tok, template, system, user, **kwargs)
            if system and case["text"] == render(tok, template, "", user, **kwargs):
                case["system_dropped"] = True
        except Exception as e:  # the template's raise_exception: jinja2's TemplateError
            case["error"] = str(e)
        cases.append(case)
    return cases


def main():
    templates = []
    for file, model, family, bos, eos, source in SOURCES:
        with open(os.path.join(FOLDER, file), encoding="utf-8") as f:
            template = f.read()
        templates.append({"file": file, "model": model, "family": family, "bos_token": bos,
                          "eos_token": eos, "source": source,
                          "cases": cases_of(stand_in_tokenizer(bos, eos), template)})
    golden = {
        "made_by": f"tests/golden/make_chat_template_goldens.py (transformers "
                   f"{transformers.__version__})",
        "call": "apply_chat_template(messages, add_generation_prompt=True, tokenize=False)",
        "templates": templates,
    }
    path = os.path.join(FOLDER, "chat_prompts.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(templates)} templates × {len(CONVERSATIONS)} conversations")


if __name__ == "__main__":
    main()
