#!/usr/bin/env python3
"""Writes tests/golden/smollm2/token_ids.json: the ids Hugging Face's tokenizer gives SmolLM2-135M-
Instruct for texts that try the byte-level BPE of src/models/text/bpe.cpp (accents, CJK, emoji with
ZWJ sequences, code, whitespace runs, numbers, contractions, the chat markers, the empty string).

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_smollm2_token_goldens.py

It needs transformers, tokenizers and gguf (bench/setup_torch_venv.sh's venv) and the model file
$QKV_HOME/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf (QKV_HOME defaults to
~/.cache/qkv; `scripts/fetch_model smollm2` gets it). `make test` only reads the committed JSON.

The tokenizer: `AutoTokenizer.from_pretrained(dir, gguf_file=name)` builds it from the GGUF's
metadata (vocabulary, merges, the 17 control tokens as special added tokens). Its pre-tokenizer,
though, is not the model's: transformers' GGUF converter knows no split for
tokenizer.ggml.pre = "smollm" and falls back to GPT-2's plain ByteLevel, whereas SmolLM2's own
tokenizer.json (and llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM, whose regexes are "\\p{N}" then
GPT-2's) first isolates every digit: Sequence[Digits(individual_digits=True), ByteLevel(
add_prefix_space=False, trim_offsets=True, use_regex=True)]. The vocabulary has no token of two
digits, so the two agree except where white space runs into a digit ("a  1": ["a", "ĠĠ", "1"] with
the digit split, ["a", "Ġ", "Ġ", "1"] without). This script puts the model's pre-tokenizer back
and writes its ids; where the GGUF loader's own ids differ it writes them too
("transformers_gguf_ids"), to show the difference. Every case is also checked to decode back to its
text, less the bytes the vocabulary has no symbol for, which the tokenizer drops.
"""

import json
import os
import sys

from tokenizers import pre_tokenizers
from transformers import AutoTokenizer

MODEL = "SmolLM2-135M-Instruct"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")

TEXTS = [
    # plain English
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Attention is all you need, they said; and so it was.",
    # accents, composed and decomposed, and other scripts
    "Café naïve résumé façade Ångström",
    "e\u0301 combining acute, n\u0303 tilde",
    "Straße, Œuvre, ﬁ ligature, Ⅳ roman",
    "Ελληνικά: Σίσυφος",
    "Россия и Україна",
    "مرحبا بالعالم",
    "हिन्दी पाठ",
    # CJK
    "你好，世界！这是一个测试。",
    "日本語のテキストとカタカナ",
    "한국어 텍스트입니다",
    # emoji, with skin tones, flags and ZWJ sequences
    "Emoji: 😀👍🏽🇺🇸 and ❤️",
    "Family 👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈 flag",
    "🤖",
    # code
    "def foo(x):\n\treturn x ** 2  # square\n",
    "int main() {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "if (a&&b||c) { x->y = z[0]; }",
    "URL: https://example.com/path?q=1&r=2#frag",
    # white space
    "   leading and trailing   ",
    "multiple   internal    spaces",
    "tabs\tand\nnewlines\r\nmixed",
    "\n\n\n",
    "Tab\there\t\tand spaces  \t mixed",
    "a  1",
    "x\n 1",
    "   3",
    "Hello\u00a0world\u2003em\u3000ideographic",
    "next\u0085line\u2028sep\x1cfile",
    "zero\u200bwidth\u200djoiner",
    # bytes whose symbols the vocabulary lacks (0x04, 0x06, 0x13, 0x1d): dropped, their
    # neighbours meet ("!!" merges)
    "ctrl\x04\x06 bytes\x1d\n\x04\n!\x13!",
    # numbers
    "1234567",
    "3.14 and 2.71828",
    "1,000,000 and -42 and +7",
    "The year 2024 had 366 days.",
    "Mixed123abc456",
    "½ ² Ⅻ ٣ ३",
    "$100.50 €20 £5 ¥1000",
    # contractions
    "I'm sure they'll say it's fine, don't you think? We've seen it, I'd say.",
    "She's, you're, we've, he'd",
    "UPPER'S CASE'T 'RE",
    "''quoted'' and 'single'",
    # punctuation
    "Punctuation!!! ??? ... --- (parens) [brackets] {braces}",
    "email: someone@example.org",
    # the chat markers and the other special tokens
    "<|im_start|>user\nhi<|im_end|>",
    CHAT,
    "<|endoftext|><|endoftext|>",
    "<|im_start|",
    "text<repo_name>name<file_sep>code<|im_end|>",
    # the smallest texts
    "",
    " ",
    "  ",
    "\t",
    "a",
]


# The characters of one byte whose symbols SmolLM2's vocabulary lacks (it lacks 21 bytes; the others
# never stand alone in UTF-8): the tokenizer drops them.
DROPPED = "\x04\x06\x13\x14\x16\x1d"


def qkv_home():
    return os.environ.get("QKV_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "qkv")


def load_tokenizers():
    """(the model's tokenizer, transformers' GGUF loader's as it comes), both from the GGUF file;
    the first has SmolLM2's own pre-tokenizer put back (see above). Also used by
    make_smollm2_chat_goldens.py."""
    model_dir = os.path.join(qkv_home(), "models", MODEL)
    if not os.path.isfile(os.path.join(model_dir, GGUF)):
        sys.exit(f"{model_dir}/{GGUF} is missing: run scripts/fetch_model smollm2")
    gguf_loaded = AutoTokenizer.from_pretrained(model_dir, gguf_file=GGUF)
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=GGUF)
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    # The GGUF's own settings: no BOS added, and the control tokens stay whole.
    assert tok.encode("<|im_start|>") == [1] and tok.encode("hi") == tok.encode("hi", add_special_tokens=False)
    return tok, gguf_loaded


def main():
    tok, gguf_loaded = load_tokenizers()
    assert len(set(TEXTS)) == len(TEXTS)

    cases, differ = [], 0
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        decoded = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert decoded == "".join(c for c in text if c not in DROPPED), (text, ids, decoded)
        case = {"text": text, "ids": ids}
        loader_ids = gguf_loaded.encode(text, add_special_tokens=False)
        if loader_ids != ids:
            case["transformers_gguf_ids"] = loader_ids
            differ += 1
        cases.append(case)

    import tokenizers
    import transformers
    golden = {
        "model": f"{MODEL}/{GGUF}",
        "made_by": f"tests/golden/make_smollm2_token_goldens.py (transformers "
                   f"{transformers.__version__}, tokenizers {tokenizers.__version__})",
        "pre_tokenizer": "Sequence[Digits(individual_digits), ByteLevel(add_prefix_space=False, "
                         "use_regex=True)]",
        "cases": cases,
    }
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "token_ids.json")
    write_cases_json(path, golden)
    print(f"wrote {path}: {len(cases)} texts, {differ} where transformers' GGUF loader differs")


def write_cases_json(path, golden):
    """Writes `golden` (a dict whose "cases" is a list) as JSON with one case a line, so that a
    change shows as the cases it touches, and checks that it reads back equal."""
    head = json.dumps({k: v for k, v in golden.items() if k != "cases"}, ensure_ascii=False,
                      indent=1)
    lines = [json.dumps(case, ensure_ascii=False) for case in golden["cases"]]
    with open(path, "w", encoding="utf-8") as f:
        f.write(head[:-2] + ',\n "cases": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == golden


if __name__ == "__main__":
    main()
