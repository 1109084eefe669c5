"""A GGUF file with a real model's shapes, metadata and tensor types, holding random weights.

No real model can be downloaded here, yet the issue's closing note must say what a user with a
real Llama 3.2 1B Q4_K_M file would see (memory, load and explain time). This script writes a
file that qkv cannot tell from one, except that its weights and vocabulary mean nothing:

  ~/.cache/qkv/torch-venv/bin/python bench/make_shaped_gguf.py            # llama (Llama 3.2 1B)
  ~/.cache/qkv/torch-venv/bin/python bench/make_shaped_gguf.py --arch qwen2   # Qwen2.5-0.5B
  ... --arch qwen3 (Qwen3-0.6B), --arch gemma3 (Gemma-3-1B); --out DIR (default /tmp/qkv-shaped)

Needs numpy and gguf (gguf-py) only. Never commit the output (Llama's is ~0.8 GB).

What it mimics:
- Shapes and metadata: the models' config.json values, under the keys llama.cpp's
  convert_hf_to_gguf.py writes (learned from that script and from the keys the families' tiny
  goldens hold, tests/golden/gguf_families/README.md). Llama 3.2 holds rope_freqs.weight, Llama
  3.1's RoPE scaling (factor 32, low 1, high 4, original context 8192) as llama.cpp's converter
  computes it; all four tie the output to the token embedding (no output.weight).
- Tensor types: llama.cpp's Q4_K_M recipe (llama_tensor_get_type_impl in src/llama-quant.cpp):
  Q4_K by default; the tied token embedding takes the output's type, Q6_K; attn_v and ffn_down
  take Q6_K in the layers use_more_bits picks (i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2: half
  of Llama's 16 layers: 0, 1, 4, 7, 10, 13, 14, 15); norms and rope_freqs stay F32. A matrix
  whose rows (ne[0]) are not a multiple of 256 falls back as llama.cpp's tensor_type_fallback
  does: Q4_K -> Q5_0, Q6_K -> Q8_0 (Qwen2.5's 896, Gemma 3's 1152).
- Blocks: random bytes with each block's f16 scales set to small finite values, so that the
  dequantized weights are O(0.02) (standard deviation printed per type), as in trained models.
- Tokenizer: byte-level BPE (gpt2) for llama/qwen2/qwen3, SentencePiece (llama) for gemma3, with
  the real vocabulary size: the byte symbols, ~1000 merges learned here from common English words
  (so an English prompt tokenizes into words), filler tokens, and the family's special tokens at
  their real ids, typed control.
"""

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

# Common English words (most frequent first); their frequencies below follow Zipf's law.
WORDS = """the of and to a in is it you that he was for on are with as I his they be at one have
this from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so these
her long make thing see him two has look more day could go come did number sound no most people
my over know water than call first who may down side been now find any new work part take get
place made live where after back little only round man year came show every good me give our
under name very through just form sentence great think say help low line differ turn cause much
mean before move right boy old too same tell does set three want air well also play small end put
home read hand port large spell add even land here must big high such follow act why ask men
change went light kind off need house picture try us again animal point mother world near build
self earth father head stand own page should country found answer school grow study still learn
plant cover food sun four between state keep eye never last let thought city tree cross farm hard
start might story saw far sea draw left late run while press close night real life few north open
seem together next white children begin got walk example ease paper group always music those both
mark often letter until mile river car feet care second book carry took science eat room friend
began idea fish mountain stop once base hear horse cut sure watch color face wood main enough
plain girl usual young ready above ever red list though feel talk bird soon body dog family direct
pose leave song measure door product black short numeral class wind question happen complete ship
area half rock order fire south problem piece told knew pass since top whole king space heard best
hour better true during hundred five remember step early hold west ground interest reach fast verb
sing listen six table travel less morning ten simple several vowel toward war lay against pattern
slow center love person money serve appear road map rain rule govern pull cold notice voice unit
power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field
rest correct able pound done beauty drive stood contain front teach week final gave green oh quick
develop ocean warm free minute strong special mind behind clear tail produce fact street inch
multiply nothing course stay wheel full force blue object decide surface deep moon island foot
system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate miss brought heat snow tire bring yes distant fill east paint language
among attention model query key value token head layer""".split()

# 20 tokens with the llama and gemma3 files, the BOS first (as qkv and transformers' tokenizer built
# from the file count them); 19 with qwen2 and qwen3, which add no BOS.
PROMPT = "The people of the world need more water, food and light to live."


def gpt2_byte_symbols():
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the others are shifted
    to code points from 256 up (so a space is 'Ġ'), as byte-level BPE vocabularies store them."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, shift = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


def learn_merges(words, space, count):
    """Byte-pair merges learned from the word list, each word bare and after a space (`space` is
    the symbol the vocabulary writes a space as), lowercase and capitalized, weighted 1/rank
    (Zipf)."""
    freq = {}
    for rank, w in enumerate(words):
        for form in (w, w.capitalize(), space + w, space + w.capitalize()):
            freq[tuple(form)] = freq.get(tuple(form), 0) + 1.0 / (rank + 1)
    merges = []
    while len(merges) < count:
        pairs = Counter()
        for symbols, f in freq.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[(a, b)] += f
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        merged = {}
        for symbols, f in freq.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + f
        freq = merged
    return merges


def llama3_specials():
    """Llama 3's 256 special tokens, ids 128000..128255, as its tokenizer.json lists them."""
    named = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
             6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>",
             10: "<|python_tag|>"}
    out, reserved = [], 0
    for i in range(256):
        if i in named:
            out.append(named[i])
        else:
            out.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    return out


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                 "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                 "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                 "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
                 "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
QWEN3_EXTRA = ["<tool_response>", "</tool_response>", "<think>", "</think>"]

# Simplified chat templates (our own), each with the markers llama.cpp and qkv detect the family by.
LLAMA3_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}")
CHATML_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- endif %}")
GEMMA_TEMPLATE = (
    "{{ bos_token }}{%- for message in messages %}{%- set role = 'model' if message['role'] == "
    "'assistant' else message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] "
    "| trim + '<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<start_of_turn>model\\n' }}{%- endif %}")

# The models' config.json values. specials: (first id, names); n_regular: ids below it are the
# byte symbols, merges and filler.
MODELS = {
    "llama": dict(name="Llama 3.2 1B Instruct", file="Llama-3.2-1B-Instruct-shaped-Q4_K_M.gguf",
                  layers=16, hidden=2048, ffn=8192, heads=32, kv_heads=8, head_dim=64,
                  context=131072, rope_base=500000.0, eps=1e-5, vocab=128256, n_regular=128000,
                  specials=llama3_specials(), bos="<|begin_of_text|>", eos="<|eot_id|>",
                  pad="<|finetune_right_pad_id|>", add_bos=True, pre="llama-bpe",
                  template=LLAMA3_TEMPLATE,
                  rope_scaling=dict(factor=32.0, low=1.0, high=4.0, original=8192)),
    "qwen2": dict(name="Qwen2.5 0.5B Instruct", file="Qwen2.5-0.5B-Instruct-shaped-Q4_K_M.gguf",
                  layers=24, hidden=896, ffn=4864, heads=14, kv_heads=2, head_dim=64,
                  context=32768, rope_base=1e6, eps=1e-6, vocab=151936, n_regular=151643,
                  specials=QWEN_SPECIALS, bos="<|endoftext|>", eos="<|im_end|>",
                  pad="<|endoftext|>", add_bos=False, pre="qwen2", template=CHATML_TEMPLATE,
                  bias=True),
    "qwen3": dict(name="Qwen3 0.6B", file="Qwen3-0.6B-shaped-Q4_K_M.gguf",
                  layers=28, hidden=1024, ffn=3072, heads=16, kv_heads=8, head_dim=128,
                  context=40960, rope_base=1e6, eps=1e-6, vocab=151936, n_regular=151643,
                  specials=QWEN_SPECIALS + QWEN3_EXTRA, bos="<|endoftext|>", eos="<|im_end|>",
                  pad="<|endoftext|>", add_bos=False, pre="qwen2", template=CHATML_TEMPLATE,
                  qk_norm=True),
    "gemma3": dict(name="Gemma 3 1B IT", file="gemma-3-1b-it-shaped-Q4_K_M.gguf",
                   layers=26, hidden=1152, ffn=6912, heads=4, kv_heads=1, head_dim=256,
                   context=32768, rope_base=1e6, eps=1e-6, vocab=262144, sliding_window=512,
                   rope_base_swa=10000.0, template=GEMMA_TEMPLATE, qk_norm=True,
                   post_norms=True),
}

# Block layout (ggml-common.h): bytes per block of 256 (K) or 32 weights, where each block's f16
# scale(s) sit, and the scale that makes the dequantized weights' spread ~0.02 when the other
# bytes are uniform random (Q4_K: w = d*sc*q - dmin*m with 6-bit sc, m and 4-bit q; Q6_K:
# w = d*sc*(q-32), int8 sc, 6-bit q; Q5_0: d*(q-16); Q8_0: d*q).
BLOCKS = {
    Q.Q4_K: dict(weights=256, bytes=144, scales={0: 8e-5, 2: 6e-4}),
    Q.Q6_K: dict(weights=256, bytes=210, scales={208: 1.5e-5}),
    Q.Q5_0: dict(weights=32, bytes=22, scales={0: 2.2e-3}),
    Q.Q8_0: dict(weights=32, bytes=34, scales={0: 2.7e-4}),
}


def use_more_bits(i, n):
    """llama.cpp's choice of the layers whose attn_v and ffn_down Q4_K_M keeps at Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_type(name, layer, layers, ne0):
    if name == "token_embd.weight":
        t = Q.Q6_K  # tied: the output's type
    elif name.endswith(("attn_v.weight", "ffn_down.weight")) and use_more_bits(layer, layers):
        t = Q.Q6_K
    else:
        t = Q.Q4_K
    if ne0 % 256:  # tensor_type_fallback
        t = {Q.Q4_K: Q.Q5_0, Q.Q6_K: Q.Q8_0}[t]
    return t


def random_blocks(rng, qtype, rows, ne0):
    """rows x ne0 weights of qtype: random bytes, each block's f16 scales set to the type's scale
    times a factor in [0.75, 1.25)."""
    b = BLOCKS[qtype]
    n_blocks = rows * ne0 // b["weights"]
    data = np.frombuffer(rng.bytes(n_blocks * b["bytes"]), dtype=np.uint8).copy()
    blocks = data.reshape(n_blocks, b["bytes"])
    for offset, scale in b["scales"].items():
        d = (scale * rng.uniform(0.75, 1.25, n_blocks)).astype(np.float16)
        blocks[:, offset:offset + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return data.reshape(rows, ne0 // b["weights"] * b["bytes"])


def llama3_rope_factors(m):
    """Llama 3.1's RoPE scaling as llama.cpp's converter stores it (rope_freqs.weight): frequency i
    is divided by factor i (LlamaModel.generate_extra_tensors in convert_hf_to_gguf.py)."""
    s, dim = m["rope_scaling"], m["head_dim"]
    freqs = 1.0 / (m["rope_base"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    low_wavelen, high_wavelen = s["original"] / s["low"], s["original"] / s["high"]
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(s["factor"])
        else:
            smooth = (s["original"] / wavelen - s["low"]) / (s["high"] - s["low"])
            out.append(1.0 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(out, dtype=np.float32)


def layer_tensors(m, l):
    """(name, ne0, rows) of layer l's tensors; rows 0 for a vector."""
    h, q, kv = m["hidden"], m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    p = f"blk.{l}."
    out = [(p + "attn_norm.weight", h, 0), (p + "attn_q.weight", h, q),
           (p + "attn_k.weight", h, kv), (p + "attn_v.weight", h, kv),
           (p + "attn_output.weight", q, h)]
    if m.get("bias"):
        out += [(p + "attn_q.bias", q, 0), (p + "attn_k.bias", kv, 0), (p + "attn_v.bias", kv, 0)]
    if m.get("qk_norm"):
        out += [(p + "attn_q_norm.weight", m["head_dim"], 0),
                (p + "attn_k_norm.weight", m["head_dim"], 0)]
    if m.get("post_norms"):
        out += [(p + "post_attention_norm.weight", h, 0), (p + "post_ffw_norm.weight", h, 0)]
    out += [(p + "ffn_norm.weight", h, 0), (p + "ffn_gate.weight", h, m["ffn"]),
            (p + "ffn_up.weight", h, m["ffn"]), (p + "ffn_down.weight", m["ffn"], h)]
    return out


def bpe_vocab(m, n_merges):
    """Byte-level BPE: the 256 byte symbols, the merges' results, filler up to the specials (a
    filler token is never produced: no merge makes it and no English word spells it), then the
    specials as control tokens, then "[PADn]" (unused) up to the vocabulary size, as llama.cpp's
    converter pads Qwen's."""
    symbols = gpt2_byte_symbols()
    merges = learn_merges(WORDS, symbols[ord(" ")], n_merges)
    tokens = [symbols[b] for b in range(256)] + [a + b for a, b in merges]
    tokens += [f"<filler{i}>" for i in range(len(tokens), m["n_regular"])]
    types = [1] * len(tokens)
    tokens += m["specials"]
    types += [3] * len(m["specials"])
    tokens += [f"[PAD{i}]" for i in range(len(tokens), m["vocab"])]
    types += [5] * (m["vocab"] - len(types))
    assert len(tokens) == len(set(tokens)) == m["vocab"], "tokens must be unique"
    return tokens, types, [f"{a} {b}" for a, b in merges]


def spm_vocab(m, n_merges):
    """SentencePiece (tokenizer.ggml.model "llama") as Gemma 3 lays it out, roughly: <pad> <eos>
    <bos> <unk> <mask>, unused and turn tokens, <0x00>..<0xFF> byte fallback, the characters and
    the merges' results ("▁" for a space) scored so that earlier merges win, then filler."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    specials += [f"<unused{i}>" for i in range(100)] + ["<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2] + [3] * (len(specials) - 4)
    tokens = list(specials) + [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    merges = learn_merges(WORDS, "\u2581", n_merges)
    chars = sorted({c for w in WORDS for c in w + w.capitalize()} | set(",.!?'") | {"\u2581"})
    pieces = chars + [a + b for a, b in merges if a + b not in chars]
    scores = [0.0] * len(tokens) + [-1e6 - i for i in range(len(chars))]
    scores += [-float(i) for i in range(len(pieces) - len(chars))]
    tokens += pieces
    types += [1] * len(pieces)
    filler = m["vocab"] - len(tokens)
    tokens += [f"<filler{i}>" for i in range(filler)]
    types += [1] * filler
    scores += [-1e9] * filler
    assert len(tokens) == len(set(tokens)) == m["vocab"], "tokens must be unique"
    return tokens, types, scores


def add_metadata(w, arch, m, args):
    w.add_type("model")
    w.add_name(m["name"] + " (shaped: random weights)")
    w.add_block_count(m["layers"])
    w.add_context_length(m["context"])
    w.add_embedding_length(m["hidden"])
    w.add_feed_forward_length(m["ffn"])
    w.add_head_count(m["heads"])
    w.add_head_count_kv(m["kv_heads"])
    w.add_rope_freq_base(m["rope_base"])
    w.add_layer_norm_rms_eps(m["eps"])
    w.add_key_length(m["head_dim"])
    w.add_value_length(m["head_dim"])
    if arch == "gemma3":
        w.add_sliding_window(m["sliding_window"])
        w.add_float32("gemma3.rope.freq_base_swa", m["rope_base_swa"])
    if arch == "llama":
        w.add_vocab_size(m["vocab"])
        w.add_rope_dimension_count(m["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    if arch == "gemma3":
        tokens, types, scores = spm_vocab(m, args.merges)
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)
    else:
        tokens, types, merges = bpe_vocab(m, args.merges)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(m["pre"])
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(tokens.index(m["bos"]))
        w.add_eos_token_id(tokens.index(m["eos"]))
        w.add_pad_token_id(tokens.index(m["pad"]))
        w.add_add_bos_token(m["add_bos"])
    w.add_chat_template(m["template"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def add_tensors(w, m, rng, counts):
    def vector(name, n, value=None):
        data = (np.full(n, value, np.float32) if value is not None
                else rng.normal(0, 0.02, n).astype(np.float32))
        w.add_tensor(name, data)
        counts["F32"] = counts.get("F32", 0) + 1

    def matrix(name, ne0, rows, layer):
        t = q4_k_m_type(name, layer, m["layers"], ne0)
        w.add_tensor(name, random_blocks(rng, t, rows, ne0), raw_dtype=t)
        counts[t.name] = counts.get(t.name, 0) + 1

    if "rope_scaling" in m:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(m))
        counts["F32"] = counts.get("F32", 0) + 1
    matrix("token_embd.weight", m["hidden"], m["vocab"], -1)
    for l in range(m["layers"]):
        for name, ne0, rows in layer_tensors(m, l):
            if rows:
                matrix(name, ne0, rows, l)
            else:
                vector(name, ne0, None if name.endswith(".bias") else 1.0)
    vector("output_norm.weight", m["hidden"], 1.0)


def dequantized_spread(rng):
    """Each type's dequantized standard deviation and largest |w| on a sample, by gguf-py's
    dequantizer (not ours), so the printed scales are checked independently."""
    out = {}
    for t in BLOCKS:
        w = gguf.quants.dequantize(random_blocks(rng, t, 64, 1024), t)
        assert np.isfinite(w).all()
        out[t.name] = (float(w.std()), float(np.abs(w).max()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=sorted(MODELS), default="llama")
    ap.add_argument("--out", default="/tmp/qkv-shaped")
    ap.add_argument("--merges", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    m, rng = MODELS[args.arch], np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, m["file"])
    start = time.time()
    for name, (std, peak) in dequantized_spread(rng).items():
        print(f"{name}: dequantized std {std:.4f}, max |w| {peak:.4f}")
    w = gguf.GGUFWriter(path, args.arch)
    add_metadata(w, args.arch, m, args)
    counts = {}
    add_tensors(w, m, rng, counts)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{path}: {os.path.getsize(path) / 2**20:.1f} MiB, tensor types "
          + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
          + f" ({time.time() - start:.0f} s)")
    print("prompt:", PROMPT)


if __name__ == "__main__":
    sys.exit(main())
