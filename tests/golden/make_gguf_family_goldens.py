"""Tiny random models of the GGUF families qkv reads (llama: Llama 3 and Llama 2 style, qwen2,
qwen3, gemma3), written as GGUF the way llama.cpp's convert_hf_to_gguf.py writes them, and the
goldens qkv is compared with: tests/golden/gguf_families/{tiny-*.gguf,
tiny-*.{logits,attentions}.npy, goldens.json, README.md} (FORMAT.md, written by hand, says what
the files hold and how llama.cpp runs them).

    ~/.cache/qkv/torch-venv/bin/python tests/golden/make_gguf_family_goldens.py

Needs torch, transformers (5.x), gguf and tokenizers in a venv outside the repository
(bench/setup_torch_venv.sh); `make test` never runs it. Deterministic: fixed seeds; the same
versions rewrite the same bytes.

For each family: a transformers model with the family's real structure and options (3 layers, or 2
for llama2; hidden 64, 4 heads, head_dim 16 (32 for qwen3, where 4 x 32 != 64 as in real Qwen3),
intermediate 256, the tokenizer's vocabulary of ~400), its weights random at a scale that keeps
activations O(1): matrices N(0, 0.1), norm weights 1 + N(0, 0.1) (Gemma: stored w = N(0, 0.1), the
norm multiplying by 1 + w), biases N(0, 0.05). Its tensors are quantized with a different type per
tensor (gguf.quants for F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; gguf_families/ggml_k_quants.py for
Q4_K, Q5_K, Q6_K on ffn_down, whose rows hold the 256 of the intermediate size; 1-D tensors stay
F32 as llama.cpp keeps them), written with the family's metadata and a working tokenizer
(gguf_families/tiny_tokenizers.py), and the dequantized weights put back into the model ("the
original"). The file is then loaded through transformers' own GGUF reader
(from_pretrained(dir, gguf_file=...)), in float64 with eager attention (and with the softmax,
RMSNorm and RoPE frequencies transformers keeps in float32 made float64: float64_throughout), and
the goldens are
    logits      [n, vocab]            for a fixed sequence of 12 ids (BOS first where added),
    attentions  [layers, heads, n, n] every layer's attention weights for it,
    generated   [8]                   greedy ids after its first 5 ids (each step recomputes the
                                      whole sequence; eos does not stop it), with each step's
                                      margin between the best and second logit.

Where the reader drops something the file holds, the goldens come from the ORIGINAL model (its
weights replaced by the dequantized ones) instead; the reload is then also checked with the
missing config restored (its weights are right), and the README gives both differences:
  - llama3: the reader ignores rope_freqs.weight (Llama 3's per-frequency RoPE factors, which
    llama.cpp divides each rotation frequency by); it has no rope_scaling -> plain RoPE.
  - qwen3: the reader's qwen3 table has no attention.key_length, so head_dim falls back to
    Qwen3Config's 128 and the q/k/v/o shapes do not fit.
  - gemma3: the reader keeps transformers' defaults query_pre_attn_scalar = 256 (the file's
    attention scale is 1/sqrt(key_length), see FORMAT.md) and the sliding pattern of every 6th
    layer global (the file states every 3rd: attention.sliding_window_pattern = 3).
llama2 and qwen2 are read completely: their goldens are the reload's.
"""
import json
import os
import sys

import gguf
import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "gguf_families")
sys.path.insert(0, OUT)
import ggml_k_quants  # noqa: E402
import tiny_tokenizers as tt  # noqa: E402

Q = gguf.GGMLQuantizationType
TEXT = "The cat sat on the mat. Attention is all you need, said the model."
N_IDS, N_PROMPT, N_NEW = 12, 5, 8
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>",
                  "<end_of_turn>"]
def f32(x):
    """The float32 value the file stores for a float key: the original model uses it too."""
    return float(np.float32(x))


COMMON = dict(hidden_size=64, intermediate_size=256, num_attention_heads=4, head_dim=16,
              max_position_embeddings=256)


# ---------------------------------------------------------------- the families


def llama3_spec():
    vocab = tt.byte_level_bpe(tt.LLAMA3_SPLIT, LLAMA3_SPECIALS)
    ids = {"bos": tt.token_id(vocab, "<|begin_of_text|>"), "eos": tt.token_id(vocab, "<|eot_id|>")}
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    config = transformers.LlamaConfig(
        **COMMON, vocab_size=len(vocab["tokens"]), num_hidden_layers=3, num_key_value_heads=2,
        rms_norm_eps=f32(1e-5), rope_parameters=rope, tie_word_embeddings=False,
        bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    return dict(name="llama3",
                options=("Llama 3: byte-level BPE (pre llama-bpe), BOS added; rope_theta 500000 "
                         "with llama3 scaling (factor 8, low 1, high 4, original context 64) "
                         "stored as rope_freqs.weight; GQA 4:2; separate output.weight; q/k rows"
                         " permuted (llama.cpp's normal RoPE)"),
                arch="llama", config=config, cls=transformers.LlamaForCausalLM,
                vocab=vocab, tok=("gpt2", "llama-bpe", ids, tt.LLAMA3_TEMPLATE, True, None),
                permute_qk=True, key_length=True, seed=3,
                types={"token_embd": Q.F16, "output": Q.Q8_0, "attn_q": Q.Q4_0,
                       "attn_k": Q.Q4_1, "attn_v": Q.Q5_0, "attn_output": Q.Q5_1,
                       "ffn_gate": Q.Q4_0, "ffn_up": Q.Q5_0,
                       "ffn_down": [Q.Q4_K, Q.Q5_K, Q.Q6_K]},
                file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M,
                dropped="rope_freqs.weight (Llama 3 RoPE scaling) is not read")


def llama2_spec():
    vocab = tt.sentencepiece_bpe(["<unk>", "<s>", "</s>"], "<unk>", add_space_prefix=True)
    ids = {"bos": 1, "eos": 2, "unk": 0}
    config = transformers.LlamaConfig(
        **COMMON, vocab_size=len(vocab["tokens"]), num_hidden_layers=2, num_key_value_heads=4,
        rms_norm_eps=f32(1e-6), rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    return dict(name="llama2",
                options=("Llama 2 / TinyLlama / Mistral: SentencePiece vocabulary (scores, "
                         "<0x00>..<0xFF> byte fallback, <unk> <s> </s>), BOS added, space prefix"
                         " by default; rope_theta 10000; MHA 4:4; tied output (no "
                         "output.weight); no attention.key_length; 2 layers; q/k rows permuted"),
                arch="llama", config=config, cls=transformers.LlamaForCausalLM,
                vocab=vocab, tok=("llama", "default", ids, tt.MISTRAL_TEMPLATE, True, None),
                permute_qk=True, key_length=False, seed=6,
                types={"token_embd": Q.Q8_0, "attn_q": Q.BF16, "attn_k": Q.BF16,
                       "attn_v": Q.BF16, "attn_output": Q.BF16, "ffn_gate": Q.F16,
                       "ffn_up": Q.F16, "ffn_down": [Q.Q6_K, Q.Q8_0]},
                file_type=gguf.LlamaFileType.MOSTLY_BF16, dropped=None)


def qwen2_spec():
    vocab = tt.byte_level_bpe(tt.QWEN2_SPLIT, QWEN_SPECIALS)
    eot = tt.token_id(vocab, "<|endoftext|>")
    ids = {"bos": eot, "eos": tt.token_id(vocab, "<|im_end|>"), "pad": eot}
    config = transformers.Qwen2Config(
        **COMMON, vocab_size=len(vocab["tokens"]), num_hidden_layers=3, num_key_value_heads=2,
        rms_norm_eps=f32(1e-6), rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True, bos_token_id=eot, eos_token_id=ids["eos"])
    return dict(name="qwen2",
                options=("q, k, v biases; NeoX RoPE (no permutation); rope_theta 1e6; GQA 4:2; "
                         "tied output; byte-level BPE (pre qwen2), no BOS"),
                arch="qwen2", config=config, cls=transformers.Qwen2ForCausalLM,
                vocab=vocab, tok=("gpt2", "qwen2", ids, tt.QWEN2_TEMPLATE, False, None),
                permute_qk=False, key_length=False, seed=4,
                types={"token_embd": Q.Q5_1, "attn_q": Q.Q8_0, "attn_k": Q.Q8_0,
                       "attn_v": Q.Q8_0, "attn_output": Q.Q4_1, "ffn_gate": Q.Q5_1,
                       "ffn_up": Q.Q4_0, "ffn_down": [Q.Q5_K, Q.Q4_K, Q.Q8_0]},
                file_type=gguf.LlamaFileType.MOSTLY_Q5_K_M, dropped=None)


def qwen3_spec():
    vocab = tt.byte_level_bpe(tt.QWEN2_SPLIT, QWEN_SPECIALS)
    eot = tt.token_id(vocab, "<|endoftext|>")
    ids = {"bos": eot, "eos": tt.token_id(vocab, "<|im_end|>"), "pad": eot}
    config = transformers.Qwen3Config(
        **dict(COMMON, head_dim=32), vocab_size=len(vocab["tokens"]), num_hidden_layers=3,
        num_key_value_heads=1, rms_norm_eps=f32(1e-6),
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False, bos_token_id=eot, eos_token_id=ids["eos"])
    return dict(name="qwen3",
                options=("q_norm, k_norm (RMSNorm over each head's 32 dims, before RoPE); "
                         "head_dim 32 != 64/4 (attention.key_length); MQA 4:1; NeoX RoPE; "
                         "rope_theta 1e6; separate output.weight; no biases; pre qwen2, no BOS"),
                arch="qwen3", config=config, cls=transformers.Qwen3ForCausalLM,
                vocab=vocab, tok=("gpt2", "qwen2", ids, tt.QWEN3_TEMPLATE, False, None),
                permute_qk=False, key_length=True, seed=7,
                types={"token_embd": Q.Q4_0, "output": Q.Q5_0, "attn_q": Q.Q5_1,
                       "attn_k": Q.Q8_0, "attn_v": Q.Q4_1, "attn_output": Q.Q5_0,
                       "ffn_gate": Q.Q8_0, "ffn_up": Q.Q4_1,
                       "ffn_down": [Q.Q6_K, Q.Q4_K, Q.Q5_K]},
                file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M,
                dropped="attention.key_length (head_dim) is not read for qwen3")


def gemma3_spec():
    vocab = tt.sentencepiece_bpe(GEMMA_SPECIALS, "<unk>", add_space_prefix=False)
    ids = {"bos": 2, "eos": 1, "unk": 3, "pad": 0}
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    config = transformers.Gemma3TextConfig(
        **COMMON, vocab_size=len(vocab["tokens"]), num_hidden_layers=3, num_key_value_heads=1,
        rms_norm_eps=f32(1e-6), rope_parameters=rope, sliding_window=4,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        query_pre_attn_scalar=16, tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
        pad_token_id=0)
    return dict(name="gemma3",
                options=("norm weights stored +1 (all six kinds, q/k norms too); GeGLU (gelu "
                         "tanh); embeddings x sqrt(64); tied output; post-attention and post-FFN"
                         " norms; sliding window 4 on layers 0, 1 and global layer 2 "
                         "(sliding_window_pattern 3); RoPE base 10000 local, 1e6 global; "
                         "attention scale 1/sqrt(16); MQA 4:1; SentencePiece without space "
                         "prefix; an all-F32 twin"),
                arch="gemma3", config=config, cls=transformers.Gemma3ForCausalLM,
                vocab=vocab, tok=("llama", "default", ids, tt.GEMMA3_TEMPLATE, True, False),
                permute_qk=False, key_length=True, seed=4, norm_plus_one=True, f32_variant=True,
                types={"token_embd": Q.Q8_0, "attn_q": Q.BF16, "attn_k": Q.F16,
                       "attn_v": Q.Q4_0, "attn_output": Q.Q5_0, "ffn_gate": Q.Q4_1,
                       "ffn_up": Q.Q5_1, "ffn_down": [Q.Q4_K, Q.Q5_K, Q.Q6_K]},
                file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M,
                dropped="query_pre_attn_scalar and the sliding pattern are not read")


SPECS = [llama3_spec, llama2_spec, qwen2_spec, qwen3_spec, gemma3_spec]


# ---------------------------------------------------------------- weights


def randomize(model, spec):
    """Weights at a scale that keeps activations O(1) (see the header). Each family's seed is the
    first whose greedy ids are not one token repeated, with a margin over 0.01."""
    gen = torch.Generator().manual_seed(spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "norm" in name:
                p.copy_(0.1 * noise if spec.get("norm_plus_one") else 1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.05 * noise)
            else:
                p.copy_(0.1 * noise)


def permute_rows(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF's rotate-half rows -> llama.cpp's adjacent
    pairs, per head: rows [h, 2, d/2] -> [h, d/2, 2]."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def unpermute_rows(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def to_gguf_tensors(model, spec):
    """[(gguf name, float32 array as stored, hf name)] in the converter's order."""
    cfg = spec["config"]
    arch = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[spec["arch"]]
    name_map = gguf.get_tensor_name_map(arch, cfg.num_hidden_layers)
    out = []
    for hf_name, p in model.state_dict().items():
        if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue  # tied: no output.weight, llama.cpp reads token_embd instead
        stem, suffix = hf_name.rsplit(".", 1)
        name = name_map.get_name(stem) + "." + suffix
        w = p.detach().to(torch.float64).numpy()
        if spec["permute_qk"] and ".attn_q." in name:
            w = permute_rows(w, cfg.num_attention_heads)
        if spec["permute_qk"] and ".attn_k." in name:
            w = permute_rows(w, cfg.num_key_value_heads)
        if spec.get("norm_plus_one") and name.endswith("norm.weight"):
            w = w + 1.0  # Gemma3Model.norm_shift: the file holds the multiplier 1 + w
        out.append((name, w.astype(np.float32), hf_name))
    return out


def tensor_type(spec, name, w):
    if w.ndim == 1:
        return Q.F32
    kind = name.split(".")[-2] if name.startswith("blk.") else name.split(".")[0]
    t = spec["types"][kind]
    return t[int(name.split(".")[1])] if isinstance(t, list) else t


def quantize(w, qtype):
    """(bytes or array to store, float32 dequantized [same shape as w])."""
    if qtype.name in ggml_k_quants.QUANTIZERS:
        data = ggml_k_quants.quantize(w, qtype.name)
    else:
        data = gguf.quants.quantize(w, qtype)
    back = gguf.quants.dequantize(data, qtype).reshape(w.shape)
    # A wrong block layout shows as errors of the weights' own size; 4 bits stay under 1/8 of the
    # block's max |w| (Q4_0 maps the far side's extreme to 7/8 of it).
    error = float(np.abs(back - w).max() / np.abs(w).max())
    assert error < 0.13, (qtype.name, error)
    return data, back.astype(np.float32), error


def from_stored(name, w, spec):
    """Undo the converter's changes: the weight transformers holds for a stored tensor."""
    cfg = spec["config"]
    w = w.astype(np.float64)
    if spec["permute_qk"] and ".attn_q." in name:
        w = unpermute_rows(w, cfg.num_attention_heads)
    if spec["permute_qk"] and ".attn_k." in name:
        w = unpermute_rows(w, cfg.num_key_value_heads)
    if spec.get("norm_plus_one") and name.endswith("norm.weight"):
        w = w - 1.0
    return w


def llama3_rope_factors(spec):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: llama.cpp divides frequency i by
    factor i. Computed from rope_parameters' original_max_position_embeddings (64 here); the
    converter reads that key at the top level of config.json (default 8192, which is Llama 3.x's
    value in both places), so a converted Llama 3 file holds the same numbers."""
    r = spec["config"].rope_parameters
    dim = spec["config"].head_dim
    freqs = 1.0 / (r["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old = r["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / r["low_freq_factor"], old / r["high_freq_factor"]
    factors = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(r["factor"])
        else:
            smooth = (old / wavelen - r["low_freq_factor"]) / (
                r["high_freq_factor"] - r["low_freq_factor"])
            factors.append(1.0 / ((1 - smooth) / r["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


# ---------------------------------------------------------------- the file


def write_hparams(writer, spec):
    """The {arch}.* keys, as TextModel/LlamaModel/Gemma3Model.set_gguf_parameters write them."""
    cfg = spec["config"]
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)
    writer.add_rope_freq_base(rope["rope_theta"])
    if "sliding_attention" in cfg.rope_parameters:
        writer.add_rope_freq_base_swa(cfg.rope_parameters["sliding_attention"]["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if spec["key_length"]:
        writer.add_key_length(cfg.head_dim)
        writer.add_value_length(cfg.head_dim)
    if spec["arch"] == "llama":
        writer.add_vocab_size(cfg.vocab_size)
        writer.add_rope_dimension_count(cfg.head_dim)
    if spec["arch"] == "gemma3":
        writer.add_sliding_window(cfg.sliding_window)
        # Not written by the converter (llama.cpp then assumes 6), but read (see FORMAT.md).
        period = cfg.layer_types.index("full_attention") + 1
        writer.add_sliding_window_pattern(period)
    writer.add_file_type(spec["file_type"])


def write_gguf(path, spec, stored):
    writer = gguf.GGUFWriter(path, spec["arch"])
    writer.add_type("model")
    writer.add_name(f"tiny-{spec['name']}")
    write_hparams(writer, spec)
    model, pre, ids, template, add_bos, space = spec["tok"]
    tt.add_to_gguf(writer, spec["vocab"], model, pre, ids, template, add_bos, space)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, data, qtype in stored:
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def build(spec):
    """(path, original model with the dequantized weights, [(name, type name, shape)])."""
    torch.manual_seed(spec["seed"])
    model = spec["cls"](spec["config"]).to(torch.float64)
    randomize(model, spec)
    stored, plain, table, deq, errors = [], [], [], {}, {}
    if spec["name"] == "llama3":
        stored.append(("rope_freqs.weight", llama3_rope_factors(spec), Q.F32))
    for name, w, hf_name in to_gguf_tensors(model, spec):
        qtype = tensor_type(spec, name, w)
        data, back, errors[name] = quantize(w, qtype)
        stored.append((name, data, qtype))
        plain.append((name, back, Q.F32))
        deq[hf_name] = torch.from_numpy(from_stored(name, back, spec))
    if spec["config"].tie_word_embeddings and "lm_head.weight" in model.state_dict():
        deq["lm_head.weight"] = deq["model.embed_tokens.weight"]
    model.load_state_dict(deq, strict=True)
    for name, data, qtype in stored:
        shape = list(data.shape) if qtype in (Q.F32, Q.F16) else list(
            gguf.quants.quant_shape_from_byte_shape(data.shape, qtype))
        table.append((name, qtype.name, shape, errors.get(name, 0.0)))
    path = os.path.join(OUT, f"tiny-{spec['name']}.gguf")
    write_gguf(path, spec, stored)
    if spec.get("f32_variant"):  # the same dequantized weights, all F32: the same goldens
        f32 = dict(spec, file_type=gguf.LlamaFileType.ALL_F32)
        write_gguf(path.replace(".gguf", "-f32.gguf"), f32, plain)
    return path, model.eval(), table


# ---------------------------------------------------------------- the goldens


class _TorchWithFloat64:
    """`torch` as the modeling modules see it, with torch.float / torch.float32 meaning float64."""

    def __getattr__(self, name):
        return torch.float64 if name in ("float", "float32") else getattr(torch, name)


class float64_throughout:
    """transformers computes the softmax (dtype=torch.float32), RMSNorm (.to(torch.float32),
    Gemma's x.float()) and the RoPE inverse frequencies (dtype=torch.float) in float32 even in a
    float64 model. Within this context the modeling modules' `torch` and Tensor.float give float64
    instead, so the goldens are float64 through and through (the README gives how much it moved
    them)."""
    MODULES = ["transformers.modeling_rope_utils", "transformers.models.llama.modeling_llama",
               "transformers.models.qwen2.modeling_qwen2",
               "transformers.models.qwen3.modeling_qwen3",
               "transformers.models.gemma3.modeling_gemma3"]

    def __enter__(self):
        self.saved = [(sys.modules[m], sys.modules[m].torch) for m in self.MODULES]
        self.float = torch.Tensor.float
        for module, _ in self.saved:
            module.torch = _TorchWithFloat64()
        torch.Tensor.float = lambda t, *a, **k: t.to(torch.float64)
        return self

    def __exit__(self, *exc):
        for module, original in self.saved:
            module.torch = original
        torch.Tensor.float = self.float


def fixed_ids(path, spec):
    """The first N_IDS ids of TEXT by transformers' tokenizer built from the file (BOS first where
    the file says add_bos_token), and that tokenizer's ids for a few texts."""
    tok = AutoTokenizer.from_pretrained(OUT, gguf_file=os.path.basename(path))
    ids = tok(TEXT)["input_ids"][:N_IDS]
    if spec["tok"][4]:
        assert ids[0] == spec["tok"][2]["bos"], (spec["name"], ids)
    return ids, tok


@torch.no_grad()
def run(model, ids):
    """(logits [n, vocab], attentions [layers, heads, n, n]) in float64."""
    out = model(torch.tensor([ids]), output_attentions=True)
    attn = torch.stack([a[0] for a in out.attentions])
    return out.logits[0].numpy(), attn.numpy()


@torch.no_grad()
def greedy(model, prompt):
    """N_NEW greedy ids, recomputing the whole sequence each step; and each step's top-2 margin."""
    ids, margins = list(prompt), []
    for _ in range(N_NEW):
        logits = model(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(int(top.indices[0]))
    return ids[len(prompt):], margins


@torch.no_grad()
def generate_agrees(model, prompt, new_ids, eos):
    """transformers' generate (do_sample=False, with its KV cache) gives the same ids up to eos."""
    out = model.generate(torch.tensor([prompt]), max_new_tokens=N_NEW, do_sample=False,
                         pad_token_id=eos)[0, len(prompt):].tolist()
    return out == new_ids[:len(out)] and (len(out) == N_NEW or out[-1] == eos)


def reload(path, spec, config=None):
    """transformers' GGUF reader on the file, float64, eager attention (with `config` instead of the
    one it reads from the file, where given); None where it fails."""
    extra = {} if config is None else {"config": config}
    try:
        return AutoModelForCausalLM.from_pretrained(
            OUT, gguf_file=os.path.basename(path), dtype=torch.float64,
            attn_implementation="eager", **extra).eval()
    except Exception as e:  # noqa: BLE001 -- the reason goes into the README
        print(f"{spec['name']}: transformers' reader failed: {type(e).__name__}: {e}"[:300],
              file=sys.stderr)
        return None


def max_rel(a, b):
    """max |a - b| over each row, relative to the row's max |b|: §1.5's logit measure."""
    scale = np.abs(b).max(axis=-1, keepdims=True)
    return float((np.abs(a - b) / scale).max())


def weights_from_reader(path, spec, ids, reference_logits):
    """{what was compared: difference} between the reader's model and the reference; with the
    original config given to the reader where it drops something (its weights are then checked);
    and the same for the all-F32 twin where there is one."""
    out, reloaded = {}, reload(path, spec)
    out["reload"] = "fails" if reloaded is None else max_rel(run(reloaded, ids)[0],
                                                             reference_logits)
    paths = [path] + ([path.replace(".gguf", "-f32.gguf")] if spec.get("f32_variant") else [])
    for p in paths:
        label = "reload" + (" of the F32 twin" if p != path else "")
        if spec["dropped"]:
            fixed = reload(p, spec, config=spec["config"])
            label += ", config restored"
        else:
            fixed = reload(p, spec)
        out[label] = "fails" if fixed is None else max_rel(run(fixed, ids)[0], reference_logits)
    return out, reloaded


def goldens(spec):
    path, original, table = build(spec)
    original.config._attn_implementation = "eager"
    ids, tok = fixed_ids(path, spec)
    ref_logits, _ = run(original, ids)
    diffs, reloaded = weights_from_reader(path, spec, ids, ref_logits)
    source = original if spec["dropped"] or reloaded is None else reloaded
    logits, attn = run(source, ids)
    new_ids, margins = greedy(source, ids[:N_PROMPT])
    agrees = generate_agrees(source, ids[:N_PROMPT], new_ids, spec["tok"][2]["eos"])
    stem = os.path.join(OUT, f"tiny-{spec['name']}")
    np.save(stem + ".logits.npy", logits)  # .npy float64: what qkv's npy reader takes
    np.save(stem + ".attentions.npy", attn)
    samples = {t: tok(t)["input_ids"] for t in tt.SAMPLE_TEXTS}
    return dict(name=spec["name"], arch=spec["arch"], file=os.path.basename(path),
                size=os.path.getsize(path), table=table, ids=ids, prompt=ids[:N_PROMPT],
                generated=new_ids, generated_margins=margins, min_margin=min(margins),
                generate_agrees=agrees, diffs=diffs,
                source="original (dequantized weights)" if source is original else "reload",
                options=spec["options"],
                dropped=spec["dropped"], vocab=len(spec["vocab"]["tokens"]), samples=samples)


# ---------------------------------------------------------------- README.md


README_HEAD = """# Tiny GGUF models of each family, and their goldens

Written by `tests/golden/make_gguf_family_goldens.py` (its header says how and why; FORMAT.md says
what each family's file holds and how llama.cpp and transformers run it). Random weights, so the
text they generate is nonsense; the numbers are what is compared.

`tiny-NAME.logits.npy` [12, vocab] and `tiny-NAME.attentions.npy` [layers, heads, 12, 12] (each
query head; masked entries exactly 0): float64, from transformers in float64 with eager attention,
for the input `ids` in `goldens.json`: 12 ids by transformers' tokenizer built from the file, BOS
first where the file adds one. `goldens.json` per family: `ids`, `prompt` (= ids[:5]) and
`generated`, 8 greedy ids after it (each step recomputes the sequence; eos does not stop it), with
`generated_margins`, each step's best minus second logit; `samples`, transformers' tokenizer's ids
for a few texts; `table`, each tensor's type and shape; `diffs`, below.

float64 throughout: transformers computes softmax, RMSNorm and the RoPE frequencies in float32
even in a float64 model; the script runs it with those in float64 (`float64_throughout`), which
moves the goldens by about 2e-7 of their scale (at most 2.3e-7 when measured).

Reload vs original: the largest |logit difference| over each position, relative to that
position's largest |logit| (docs/CONVENTIONS.md section 1.5), between the model transformers' GGUF
reader builds from the file and the original model holding the file's dequantized weights (and the
file's float32 rms eps); 0 is bit-identical.
"""


def describe(path):
    """Markdown lines: a file's keys (long arrays as counts) and tensors (type, ne)."""
    r = gguf.GGUFReader(path)
    lines = [f"### {os.path.basename(path)}", "", "| key | type | value |", "|---|---|---|"]
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        v = f.contents()
        if k == "tokenizer.chat_template":
            v = f"({len(v)} characters)"
        elif isinstance(v, list) and len(v) > 4:
            v = f"[{len(v)}] {v[:3]}..."
        kind = "/".join(t.name for t in f.types)
        lines.append(f"| {k} | {kind} | {str(v).replace('|', '&#124;')} |")
    lines += ["", "| tensor | type | ne (innermost first) |", "|---|---|---|"]
    lines += [f"| {t.name} | {t.tensor_type.name} | {[int(n) for n in t.shape]} |"
              for t in r.tensors]
    return lines + [""]


def fmt_diff(v):
    return v if isinstance(v, str) else f"{v:.3g}"


def write_readme(results):
    rows = ["| file | family | options exercised | tensor types | goldens from | "
            "reload vs original |", "|---|---|---|---|---|---|"]
    for r in results:
        types = {}
        for _, t, _, _ in r["table"]:
            types[t] = types.get(t, 0) + 1
        kinds = ", ".join(f"{t} x{n}" for t, n in sorted(types.items()))
        diffs = "; ".join(f"{k}: {fmt_diff(v)}" for k, v in r["diffs"].items())
        if r["dropped"]:
            diffs += f" ({r['dropped']})"
        rows.append(f"| {r['file']} ({r['size'] // 1024} KiB) | {r['arch']} | {r['options']} | "
                    f"{kinds} | {r['source']}; greedy ids {r['generated']} (smallest margin "
                    f"{r['min_margin']:.2g}; generate() agrees: {r['generate_agrees']}) | "
                    f"{diffs} |")
    worst = {}
    for r in results:
        for _, t, _, e in r["table"]:
            worst[t] = max(worst.get(t, 0.0), e)
    errors = ", ".join(f"{t} {e:.2g}" for t, e in sorted(worst.items()))
    lines = [README_HEAD, "## The files", ""] + rows + [
        "", f"Round trip, max |dequantized - weight| / max |weight| per tensor, worst by type: "
        f"{errors}. The goldens use the dequantized weights.", "", "## What each file holds", ""]
    for name in sorted(os.listdir(OUT)):
        if name.endswith(".gguf"):
            lines += describe(os.path.join(OUT, name))
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    torch.set_grad_enabled(False)
    for m in float64_throughout.MODULES:
        __import__(m)
    with float64_throughout():
        results = [goldens(make()) for make in SPECS]
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
        f.write("\n")
    write_readme(results)
    for r in results:
        print(r["name"], r["file"], r["size"], r["source"], r["diffs"], "gen ok",
              r["generate_agrees"], "min margin %.3g" % r["min_margin"], file=sys.stderr)


if __name__ == "__main__":
    main()
