"""Small working tokenizers for the tiny GGUF models, trained with the `tokenizers` library on a
short English text, and written under the tokenizer.ggml.* keys as llama.cpp's convert_hf_to_gguf.py
writes them (_set_vocab_gpt2 for byte-level BPE, _set_vocab_sentencepiece for SentencePiece;
gguf.SpecialVocab for the special ids, add_bos_token and the chat template).

  byte-level BPE (tokenizer.ggml.model "gpt2"): the 256 byte symbols in GPT-2's byte-to-unicode
      spelling, the learned merges, then the family's control tokens at the end (as Llama 3's
      128000+ and Qwen's 151643+ are); pre-tokenized with the family's split regex.
  SentencePiece (tokenizer.ggml.model "llama"): control tokens, the 256 byte-fallback tokens
      <0x00>..<0xFF>, the learned pieces (U+2581 for a space) in merge order with score -rank, then
      the single characters with the lowest scores, as a SentencePiece BPE model orders them.
"""
import json

import gguf
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog didn't move; it's a very lazy dog.
Attention is all you need: each query looks at every key, and the values it finds are mixed.
What are Q, K and V? The query asks, the key answers, and the value is what gets carried.
We'll read the model's weights from the file, and we're going to see where each head looks.
In 2024 there were 365 days? No: 2024 had 366 days, and 1,000,000 is a million.
I'm here, you're there, they've gone, she'll come, he'd say hello to the world again.
def attention(q, k, v):
    scores = q @ k.T / sqrt(d)
    return softmax(scores) @ v
for i in range(10): print(i, i * i)
Hello world! Hello again, world. The small model says hello to the large model.
A transformer has layers; every layer has heads; every head has its own attention pattern.
The cat sat on the mat. The rat ran to the cat. Then the cat and the rat were friends.
Language models predict the next token, one token at a time, from left to right.
"""

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Chat templates as the families ship them (text-only parts), written into tokenizer.chat_template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}")
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN3_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %}")
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") + "
    "message['content'] | trim + '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}")

NORMAL, UNKNOWN, CONTROL, BYTE = (gguf.TokenType.NORMAL, gguf.TokenType.UNKNOWN,
                                  gguf.TokenType.CONTROL, gguf.TokenType.BYTE)


def _trained_bpe(pre_tokenizer, alphabet, n_merges):
    """(vocab in id order, merges) of a BPE learned on CORPUS; the trainer is deterministic for a
    given text (it sorts pairs by count, then by the pair itself)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + n_merges, initial_alphabet=alphabet,
                                  limit_alphabet=len(alphabet), min_frequency=2,
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(keepends=True), trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return vocab, merges


def byte_level_bpe(split_regex, specials, n_merges=140):
    """{tokens, token_type, merges} of a byte-level BPE with the given split; specials appended."""
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab, merges = _trained_bpe(pre, sorted(alphabet), n_merges)
    tokens = vocab + list(specials)
    types = [NORMAL] * len(vocab) + [CONTROL] * len(specials)
    return {"tokens": tokens, "token_type": types, "merges": merges}


def sentencepiece_bpe(specials, unk, add_space_prefix, n_merges=110):
    """{tokens, scores, token_type} of a SentencePiece-style BPE vocabulary with byte fallback.
    `specials` are control tokens placed first (with `unk` the UNKNOWN one)."""
    pre = pre_tokenizers.Metaspace(replacement="\u2581",
                                   prepend_scheme="first" if add_space_prefix else "never",
                                   split=True)
    chars = sorted(set(CORPUS.replace(" ", "\u2581").replace("\n", "")) | {"\u2581"})
    vocab, _ = _trained_bpe(pre, chars, n_merges)
    pieces = [t for t in vocab if len(t) > 1]  # merge order
    singles = [t for t in vocab if len(t) == 1]
    tokens = list(specials) + [f"<0x{b:02X}>" for b in range(256)] + pieces + singles
    types = [UNKNOWN if t == unk else CONTROL for t in specials] + [BYTE] * 256
    types += [NORMAL] * (len(pieces) + len(singles))
    scores = [0.0] * (len(specials) + 256) + [-float(i) for i in range(len(pieces))]
    scores += [-float(len(pieces) + i) for i in range(len(singles))]
    return {"tokens": tokens, "scores": scores, "token_type": types}


def add_to_gguf(writer, vocab, model, pre, ids, chat_template, add_bos, add_space_prefix=None):
    """The tokenizer.ggml.* keys and tokenizer.chat_template, as the converter writes them."""
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(vocab["tokens"])
    if "scores" in vocab:
        writer.add_token_scores(vocab["scores"])
    writer.add_token_types(vocab["token_type"])
    if "merges" in vocab:
        writer.add_token_merges(vocab["merges"])
    for kind, token_id in ids.items():
        getattr(writer, f"add_{kind}_token_id")(token_id)
    writer.add_add_bos_token(add_bos)
    writer.add_add_eos_token(False)
    if add_space_prefix is not None:
        writer.add_add_space_prefix(add_space_prefix)
    writer.add_chat_template(chat_template)


def token_id(vocab, text):
    return vocab["tokens"].index(text)


# Texts whose ids transformers' tokenizer (built from each file) gives: a first check of qkv's.
SAMPLE_TEXTS = ["hello", "Hello world! The cat sat on the mat.", "I'm here, you're there.",
                "In 2024 there were 366 days.", "  two  spaces\tand a tab\n", "caf\u00e9 \u00fcber",
                "def f(x):\n    return x * 2"]
