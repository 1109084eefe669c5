"""A tiny Llama-architecture GGUF file of zero weights, written from ggml's docs/gguf.md (version 3,
little-endian, 32-byte alignment) for the tests of what a decoder does with its special tokens:
the vocabulary of tests/models/tiny_llama_gguf.h (three ChatML control tokens, the letters, a few
merges), 2 layers, 16 dimensions, 4 heads of 4 (2 key/value heads), 24 feed-forward units. With
every weight 0 every logit is 0, and greedy generation picks id 0, <|endoftext|>."""

import struct

ALIGN = 32


def _str(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _value(v):
    """(GGUF type, bytes) of a Python value: str, int (u32), float (f32), [str], [int] (i32)."""
    if isinstance(v, str):
        return 8, _str(v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if all(isinstance(x, str) for x in v):
        return 9, struct.pack("<IQ", 8, len(v)) + b"".join(_str(x) for x in v)
    return 9, struct.pack("<IQ", 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)


def tokens():
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    return ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + letters + ["Ġ", "Ċ", ".", "he", "ll", "Ġt", "Ġthe", "hell", "hello", "Ġa", "an"]


def write_zero_llama(path, layers=2, hidden=16, heads=4, kv_heads=2, ffn=24, fill=None,
                     output=None, context=32):
    """A llama GGUF whose tensors are all 0, except those `fill` names ({name: value}); with
    `output` (a list of floats a token), an untied output.weight of those rows; `context`
    positions."""
    fill = fill or {}
    vocab = tokens()
    kv = kv_heads * (hidden // heads)
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": layers, "llama.context_length": context,
        "llama.embedding_length": hidden, "llama.feed_forward_length": ffn,
        "llama.attention.head_count": heads, "llama.attention.head_count_kv": kv_heads,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": vocab,
        "tokenizer.ggml.token_type": [3, 3, 3] + [1] * (len(vocab) - 3),
        "tokenizer.ggml.merges": ["h e", "l l", "Ġ t", "Ġt he", "he ll", "hell o", "Ġ a", "a n"],
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
    }
    shapes = [("token_embd.weight", [hidden, len(vocab)])]  # ggml order: ne[0] varies fastest
    for layer in range(layers):
        p = f"blk.{layer}."
        shapes += [(p + "attn_norm.weight", [hidden]), (p + "attn_q.weight", [hidden, hidden]),
                   (p + "attn_k.weight", [hidden, kv]), (p + "attn_v.weight", [hidden, kv]),
                   (p + "attn_output.weight", [hidden, hidden]), (p + "ffn_norm.weight", [hidden]),
                   (p + "ffn_gate.weight", [hidden, ffn]), (p + "ffn_up.weight", [hidden, ffn]),
                   (p + "ffn_down.weight", [ffn, hidden])]
    shapes.append(("output_norm.weight", [hidden]))
    if output is not None:
        shapes.append(("output.weight", [hidden, len(vocab)]))
    out = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(metadata))
    for key, v in metadata.items():
        kind, data = _value(v)
        out += _str(key) + struct.pack("<I", kind) + data
    offset = 0
    for name, ne in shapes:
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        out += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", 0, offset)  # F32
        count = 1
        for n in ne:
            count *= n
        offset += 4 * count
    out += bytes(-len(out) % ALIGN)
    data = bytearray(offset)
    at = 0
    for name, ne in shapes:
        at = (at + ALIGN - 1) // ALIGN * ALIGN
        count = 1
        for n in ne:
            count *= n
        if name in fill:
            data[at:at + 4 * count] = struct.pack("<f", fill[name]) * count
        if name == "output.weight":
            rows = b"".join(struct.pack("<f", output[v]) * hidden for v in range(len(vocab)))
            data[at:at + 4 * count] = rows
        at += 4 * count
    with open(path, "wb") as f:
        f.write(out + bytes(data))
    return str(path)
