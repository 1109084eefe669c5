#!/usr/bin/env python3
"""Writes tests/golden/bpe/: for each byte-level BPE pre-tokenizer qkv reads (smollm, gpt-2,
llama-bpe, qwen2), a small vocabulary trained here as a GGUF (<pre>.gguf), and the ids Hugging
Face's tokenizers gives for texts that try its rules (<pre>.json).

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_bpe_pretokenizer_goldens.py

It needs tokenizers, gguf and transformers (bench/setup_torch_venv.sh's venv). `make test` only
reads the committed files (tests/models/bpe_pretokenizer_test.cpp).

No real Llama 3 or Qwen vocabulary can be fetched here, so each vocabulary is trained with the
`tokenizers` library on CORPUS (digits, contractions in both cases, CJK, emoji, white space runs,
tabs, CRLF, code), a few hundred merges over the 256 byte symbols, through the same normalizer and
pre-tokenizer as the model's own tokenizer.json:

  llama-bpe  Meta-Llama-3(.1/.2)'s: no normalizer; Split(LLAMA3, Isolated), ByteLevel(
             add_prefix_space=False, trim_offsets=True, use_regex=False); BPE ignore_merges=True.
  qwen2      Qwen2/2.5/3's: NFC normalizer; Split(QWEN2, Isolated), the same ByteLevel; BPE.
  smollm     SmolLM2's: Digits(individual_digits=True), ByteLevel(use_regex=True); BPE.
  gpt-2      GPT-2's: ByteLevel(add_prefix_space=False, use_regex=True); BPE.

Each vocabulary then gets a few tokens no merge makes, each a whole piece of some test text
(WHOLE_PIECES): with Llama 3's ignore_merges the tokenizer takes such a piece whole, without it
the merges cut it up, so the llama-bpe goldens show that qkv does what the flag says. The control
tokens are added as HF's special tokens (normalized=False) and written with token type 3.

Also recorded, per case, whether transformers' own GGUF tokenizer loader
(transformers.integrations.gguf: GPT2Tokenizer plus a Split regex per tokenizer.ggml.pre) gives
the same ids ("transformers_gguf_ids" where it does not): it knows no "smollm" split, sets no
ignore_merges and no NFC, so it differs from the models' own tokenizers on some cases.
"""

import json
import os
import sys
import unicodedata

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bpe")

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog doesn't care; it's asleep.",
    "I'M SURE THEY'RE HERE. WE'LL SEE WHAT YOU'VE DONE, SHE'D SAY. It'S fine, isn'T it?",
    "In 2024 there were 1234567 tokens, 3.14159 of pi, 42 answers and 1000000 dollars.",
    "Call 555-0199 or +1 (800) 123-4567 before 23:59 on 2025-12-31; costs $19.99.",
    "你好，世界！这是一个测试。日本語のテキストとカタカナ。한국어 텍스트입니다.",
    "Emoji 😀👍🏽🇺🇸 and ❤️ and 👨\u200d👩\u200d👧 — a family, 🤖 a robot.",
    "def attention(q, k, v):\n    scores = q @ k.T / math.sqrt(d)\n    return softmax(scores) @ v\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\r\nreturn sum;\r\n",
    "    indented    with    runs     of spaces\t\ttabs\n\n\nand blank lines\r\n\r\n",
    "Café naïve résumé façade Ångström straße Ελληνικά Россия مرحبا हिन्दी",
    "if (x != y && z >= 10) { print(\"done!\"); }  // comment\n# another comment\n",
    "<html><body class=\"main\">Hello, world!</body></html>\n",
    "1 12 123 1234 12345 123456 ½ Ⅻ ٣٤٥ ⅷ",
    "  leading spaces, trailing spaces   \n  \n\t\n",
]

TEXTS = [
    "",
    " ",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    # contractions, in every case; an apostrophe elsewhere is punctuation
    "don't we'll they're I've I'm he'd it's",
    "DON'T WE'LL THEY'RE I'VE I'M HE'D IT'S",
    "It'S We'Ll they'rE I'vE",
    "''s 'sa 'x rock'n'roll",
    "x'\u017f y'\u017ft",  # ſ folds to s under (?i:...)
    # digits: one, three, or all at a time
    "1234567890",
    "In 2024, 3.14159 and 1000000.",
    "abc123def 12 345",
    "½ Ⅻ ٣٤٥ ⅷ ²³",
    "a 1  22   333",
    # letters after one non-letter, non-newline character
    "\tword ,word .word\nword",
    "(hello) [world] {x}",
    "$100 #tag @user",
    # punctuation runs, with the newlines after them
    "!!!\n\nx",
    "end.\r\n\r\nnext",
    "a --> b ==> c",
    # white space: runs, tabs, CR LF, runs that end in a newline, trailing
    "  a   b",
    "a\tb\t\tc",
    "x\n y",
    "x \n",
    "a  \n\n  b\r\n\tc",
    "line1\r\nline2\r\n",
    "end   ",
    "\n\n\n",
    " \t \n \t x",
    "a\u00a0b \u3000c\u2028d",
    # code
    "def f(x):\n    return x**2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "<html><body class=\"main\">Hi!</body></html>",
    # other scripts
    "你好，世界！这是一个测试。",
    "日本語のテキスト",
    "한국어 텍스트",
    "Café naïve résumé Ångström",
    "Ελληνικά Россия مرحبا हिन्दी",
    # emoji
    "Emoji: 😀👍🏽🇺🇸 and ❤️",
    "👨\u200d👩\u200d👧 🤖",
    # text not in NFC: Qwen's normalizer composes it
    "cafe\u0301 n\u0303 A\u030a",
    "\u212b \u1100\u1161\u11a8 a\u0307\u0323",
    # the pieces that are tokens no merge makes (WHOLE_PIECES)
    " quixotic zebra 987",
    "Xylophone's 654 quixotic",
]

# Tokens added to each vocabulary that no merge makes: whole pieces under every pre-tokenizer.
WHOLE_PIECES = [" quixotic", " zebra", "Xylophone"]
# ... and the digit runs that are whole pieces under llama-bpe's \p{N}{1,3} only.
WHOLE_DIGITS = ["987", "654"]

SPECIALS = {
    "llama-bpe": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "smollm": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "gpt-2": ["<|endoftext|>"],
}
SPECIAL_TEXTS = {
    "llama-bpe": ["<|begin_of_text|><|eot_id|>user\n\nHi 12345!<|eot_id|>",
                  "x<|end_of_text|>y <|begin_of_text"],
    "qwen2": ["<|im_start|>user\nHi 12345!<|im_end|>\n<|im_start|>assistant\n",
              "cafe\u0301<|endoftext|>e\u0301"],
    "smollm": ["<|im_start|>user\nHi 12345!<|im_end|>\n"],
    "gpt-2": ["one<|endoftext|>two"],
}
ARCH = {"llama-bpe": "llama", "qwen2": "qwen2", "smollm": "llama", "gpt-2": "gpt2"}


def byte_level():
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)


def pipeline(pre):
    """The normalizer and pre-tokenizer of the model's tokenizer.json."""
    if pre == "llama-bpe":
        return None, pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False), byte_level()])
    if pre == "qwen2":
        return normalizers.NFC(), pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False), byte_level()])
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre == "smollm":
        return None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2])
    return None, gpt2


def configure(tok, pre):
    normalizer, pre_tokenizer = pipeline(pre)
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()


def train(pre):
    """A vocabulary of the 256 byte symbols and ~400 merges learned on CORPUS."""
    tok = Tokenizer(models.BPE())
    configure(tok, pre)
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=SPECIALS[pre])
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    assert [i for _, i in vocab] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def spelled(text):
    alphabet = {b: c for b, c in zip(range(256), byte_alphabet())}
    return "".join(alphabet[b] for b in text.encode("utf-8"))


def byte_alphabet():
    """GPT-2's bytes_to_unicode, in byte order."""
    out, n = [], 0
    for b in range(256):
        printable = 33 <= b <= 126 or 161 <= b <= 172 or b >= 174
        out.append(chr(b) if printable else chr(256 + n))
        n += not printable
    return out


def pieces(tok, text):
    """The pre-tokenizer's pieces of a text without special tokens, as text (not byte symbols)."""
    normalized = tok.normalizer.normalize_str(text) if tok.normalizer else text
    byte_of = {c: b for b, c in enumerate(byte_alphabet())}
    return [bytes(byte_of[c] for c in p).decode("utf-8")
            for p, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)]


def build(pre, tokens, merges, ignore_merges):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges],
                               ignore_merges=ignore_merges))
    configure(tok, pre)
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS[pre]])
    return tok


def write_gguf(path, pre, tokens, merges):
    types = [3 if t in SPECIALS[pre] else 1 for t in tokens]
    w = gguf.GGUFWriter(path, ARCH[pre])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types(types)
    w.add_eos_token_id(tokens.index(SPECIALS[pre][-1]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def transformers_gguf(path):
    from transformers.integrations.gguf import convert_gguf_tokenizer, get_gguf_tokenizer
    architecture, tokenizer_dict, _ = get_gguf_tokenizer(path)
    backend, _ = convert_gguf_tokenizer(architecture, tokenizer_dict)
    return backend


def make(pre):
    tokens, merges = train(pre)
    extra = [spelled(p) for p in WHOLE_PIECES + WHOLE_DIGITS]
    tokens += [t for t in extra if t not in tokens]
    path = os.path.join(OUT, pre + ".gguf")
    write_gguf(path, pre, tokens, merges)
    tok = build(pre, tokens, merges, ignore_merges=(pre == "llama-bpe"))
    plain = build(pre, tokens, merges, ignore_merges=False)
    hf_gguf = transformers_gguf(path)
    cases, whole, differs = [], 0, 0
    for text in TEXTS + SPECIAL_TEXTS[pre]:
        ids = tok.encode(text, add_special_tokens=False).ids
        case = {"text": text, "ids": ids}
        if text in TEXTS:  # no special tokens: the pre-tokenizer sees it all
            case["pieces"] = pieces(tok, text)
        whole += ids != plain.encode(text, add_special_tokens=False).ids
        theirs = hf_gguf.encode(text, add_special_tokens=False).ids
        if theirs != ids:
            case["transformers_gguf_ids"] = theirs
            differs += 1
        decoded = tok.decode(ids, skip_special_tokens=False)
        expected = unicodedata.normalize("NFC", text) if pre == "qwen2" else text
        if decoded != expected:
            sys.exit(f"{pre}: {text!r} decodes to {decoded!r}")
        cases.append(case)
    if pre == "llama-bpe" and whole < 2:
        sys.exit("ignore_merges changes too few cases to be tested")
    normalizer, pre_tokenizer = pipeline(pre)
    golden = {
        "pre": pre,
        "gguf": pre + ".gguf",
        "vocab_size": len(tokens),
        "merges": len(merges),
        "normalizer": "NFC" if normalizer else None,
        "pre_tokenizer": {"llama-bpe": "Split(" + LLAMA3 + ", Isolated), ByteLevel(use_regex=False)",
                          "qwen2": "Split(" + QWEN2 + ", Isolated), ByteLevel(use_regex=False)",
                          "smollm": "Digits(individual_digits), ByteLevel(use_regex=True)",
                          "gpt-2": "ByteLevel(use_regex=True)"}[pre],
        "ignore_merges": pre == "llama-bpe",
        "cases_changed_by_ignore_merges": whole,
        "cases_where_transformers_gguf_loader_differs": differs,
        "tokenizers": __import__("tokenizers").__version__,
        "transformers": __import__("transformers").__version__,
        "cases": cases,
    }
    with open(os.path.join(OUT, pre + ".json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{pre}: {len(tokens)} tokens, {len(merges)} merges, {len(cases)} cases, "
          f"{whole} changed by ignore_merges, transformers' GGUF loader differs on {differs}")


def main():
    os.makedirs(OUT, exist_ok=True)
    for pre in ["llama-bpe", "qwen2", "smollm", "gpt-2"]:
        make(pre)


if __name__ == "__main__":
    main()
