// A tiny Llama-architecture GGUF file built in memory, every entry editable: the base for the tests
// of what the decoder's loader refuses (lying sizes, missing merges, special ids outside the
// vocabulary, weights that overflow) and of `qkv generate` on a model small enough to run in
// milliseconds. Two layers, 16 dimensions, 4 heads of 4 (2 key/value heads), 24 feed-forward
// units, 32 positions, a 40-token byte-level BPE vocabulary with ChatML specials and merges; the
// weights are small deterministic pseudo-random numbers, stored as F32.
//
// The layout follows ggml's docs/gguf.md (version 3, little-endian, 32-byte alignment), written
// here independently of src/core/gguf.cpp so that the reader is tested against the format.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace qkv::test {

// One encoded metadata value: its GGUF type and its bytes.
struct GgufValue {
  uint32_t type = 0;
  std::string bytes;
};

namespace gguf_detail {

template <class T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
inline std::string str(const std::string& text) { return le<uint64_t>(text.size()) + text; }

}  // namespace gguf_detail

inline GgufValue gguf_u32(uint32_t v) { return {4, gguf_detail::le(v)}; }
inline GgufValue gguf_i32(int32_t v) { return {5, gguf_detail::le(v)}; }
inline GgufValue gguf_f32(float v) { return {6, gguf_detail::le(v)}; }
inline GgufValue gguf_u64(uint64_t v) { return {10, gguf_detail::le(v)}; }
inline GgufValue gguf_str(const std::string& v) { return {8, gguf_detail::str(v)}; }
inline GgufValue gguf_strings(const std::vector<std::string>& items) {
  std::string b = gguf_detail::le<uint32_t>(8) + gguf_detail::le<uint64_t>(items.size());
  for (const std::string& s : items) b += gguf_detail::str(s);
  return {9, b};
}
inline GgufValue gguf_i32s(const std::vector<int32_t>& items) {
  std::string b = gguf_detail::le<uint32_t>(5) + gguf_detail::le<uint64_t>(items.size());
  for (const int32_t v : items) b += gguf_detail::le(v);
  return {9, b};
}

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;   // ggml order: ne[0] varies fastest
  std::vector<float> values;  // empty: all zero
};

struct TinyLlamaGguf {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<GgufTensor> tensors;

  // Replaces the entry `key`, or appends it.
  TinyLlamaGguf& set(const std::string& key, GgufValue value) {
    for (auto& [k, v] : metadata)
      if (k == key) {
        v = std::move(value);
        return *this;
      }
    metadata.emplace_back(key, std::move(value));
    return *this;
  }
  TinyLlamaGguf& erase(const std::string& key) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
    return *this;
  }
  GgufTensor& tensor(const std::string& name) {
    for (GgufTensor& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("TinyLlamaGguf: no tensor " + name);
  }

  // The file's bytes. A tensor whose `values` are empty holds zeros, as many as `ne` says.
  std::string bytes() const {
    std::string data;
    std::string out = header(&data);
    return out + data;
  }

  std::string write(const std::string& path) const {
    std::ofstream(path, std::ios::binary) << bytes();
    return path;
  }

  // The same file with the tensors whose `values` are empty left as holes (a sparse file): a model
  // of gigabytes of zero weights in a few KB of disk.
  std::string write_sparse(const std::string& path) const {
    uint64_t data_size = 0;
    const std::string head = header(nullptr, &data_size);
    {
      std::ofstream out(path, std::ios::binary);
      out << head;
      uint64_t at = 0;
      for (const GgufTensor& t : tensors) {
        at = (at + kAlign - 1) / kAlign * kAlign;
        if (!t.values.empty()) {
          out.seekp(static_cast<std::streamoff>(head.size() + at));
          out.write(reinterpret_cast<const char*>(t.values.data()),
                    static_cast<std::streamsize>(t.values.size() * 4));
        }
        at += count(t) * 4;
      }
    }
    std::filesystem::resize_file(path, head.size() + data_size);
    return path;
  }

 private:
  static constexpr uint64_t kAlign = 32;
  static uint64_t count(const GgufTensor& t) {
    uint64_t n = 1;
    for (const uint64_t d : t.ne) n *= d;
    return n;
  }

  // The header, padded to the alignment; the tensors' data into *data (if given), its size into
  // *data_size (if given).
  std::string header(std::string* data, uint64_t* data_size = nullptr) const {
    using gguf_detail::le;
    std::string out =
        "GGUF" + le<uint32_t>(3) + le<uint64_t>(tensors.size()) + le<uint64_t>(metadata.size());
    for (const auto& [key, value] : metadata)
      out += gguf_detail::str(key) + le<uint32_t>(value.type) + value.bytes;
    uint64_t at = 0;
    for (const GgufTensor& t : tensors) {
      at = (at + kAlign - 1) / kAlign * kAlign;
      out += gguf_detail::str(t.name) + le<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (const uint64_t n : t.ne) out += le<uint64_t>(n);
      out += le<uint32_t>(0) + le<uint64_t>(at);  // F32 at this offset
      if (data != nullptr) {
        data->resize(at, '\0');
        if (t.values.empty())
          data->resize(at + count(t) * 4, '\0');
        else
          data->append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
      }
      at += count(t) * 4;
    }
    if (data_size != nullptr) *data_size = at;
    out.resize((out.size() + kAlign - 1) / kAlign * kAlign, '\0');
    return out;
  }
};

// The vocabulary: the three specials (control tokens), GPT-2's byte symbols for the letters,
// space (Ġ), newline (Ċ) and '.', then the tokens the merges make.
inline std::vector<std::string> tiny_llama_tokens() {
  std::vector<std::string> t = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (char c = 'a'; c <= 'z'; ++c) t.emplace_back(1, c);
  for (const char* s : {"Ġ", "Ċ", ".", "he", "ll", "Ġt", "Ġthe", "hell", "hello", "Ġa", "an"})
    t.emplace_back(s);
  return t;
}

inline TinyLlamaGguf tiny_llama_gguf() {
  constexpr int64_t kLayers = 2, kHidden = 16, kHeads = 4, kKvHeads = 2, kFfn = 24;
  constexpr int64_t kHeadDim = kHidden / kHeads, kKv = kKvHeads * kHeadDim;
  const std::vector<std::string> tokens = tiny_llama_tokens();
  std::vector<int32_t> types(tokens.size(), 1);  // normal
  types[0] = types[1] = types[2] = 3;            // control
  TinyLlamaGguf g;
  g.set("general.architecture", gguf_str("llama"))
      .set("general.name", gguf_str("tiny"))
      .set("llama.block_count", gguf_u32(kLayers))
      .set("llama.context_length", gguf_u32(32))
      .set("llama.embedding_length", gguf_u32(kHidden))
      .set("llama.feed_forward_length", gguf_u32(kFfn))
      .set("llama.attention.head_count", gguf_u32(kHeads))
      .set("llama.attention.head_count_kv", gguf_u32(kKvHeads))
      .set("llama.rope.freq_base", gguf_f32(10000))
      .set("llama.attention.layer_norm_rms_epsilon", gguf_f32(1e-5f))
      .set("llama.rope.dimension_count", gguf_u32(kHeadDim))
      .set("llama.vocab_size", gguf_u32(static_cast<uint32_t>(tokens.size())))
      .set("tokenizer.ggml.model", gguf_str("gpt2"))
      .set("tokenizer.ggml.pre", gguf_str("smollm"))
      .set("tokenizer.ggml.tokens", gguf_strings(tokens))
      .set("tokenizer.ggml.token_type", gguf_i32s(types))
      .set("tokenizer.ggml.merges",
           gguf_strings({"h e", "l l", "Ġ t", "Ġt he", "he ll", "hell o", "Ġ a", "a n"}))
      .set("tokenizer.ggml.bos_token_id", gguf_u32(1))
      .set("tokenizer.ggml.eos_token_id", gguf_u32(2))
      .set("tokenizer.ggml.padding_token_id", gguf_u32(0))
      .set("tokenizer.chat_template",
           gguf_str("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"));
  // Deterministic values in (−0.25, 0.25): a linear congruential generator's top bits.
  uint64_t state = 12345;
  const auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = (static_cast<float>(state >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.5f;
    }
    return v;
  };
  const auto ones = [](std::size_t n) { return std::vector<float>(n, 1.0f); };
  const auto matrix = [&](const std::string& name, int64_t out, int64_t in) {
    g.tensors.push_back({name, {uint64_t(in), uint64_t(out)}, random(std::size_t(out * in))});
  };
  matrix("token_embd.weight", static_cast<int64_t>(tokens.size()), kHidden);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    g.tensors.push_back({p + "attn_norm.weight", {kHidden}, ones(kHidden)});
    matrix(p + "attn_q.weight", kHidden, kHidden);
    matrix(p + "attn_k.weight", kKv, kHidden);
    matrix(p + "attn_v.weight", kKv, kHidden);
    matrix(p + "attn_output.weight", kHidden, kHidden);
    g.tensors.push_back({p + "ffn_norm.weight", {kHidden}, ones(kHidden)});
    matrix(p + "ffn_gate.weight", kFfn, kHidden);
    matrix(p + "ffn_up.weight", kFfn, kHidden);
    matrix(p + "ffn_down.weight", kHidden, kFfn);
  }
  g.tensors.push_back({"output_norm.weight", {kHidden}, ones(kHidden)});
  return g;
}

// tiny_llama_gguf's vocabulary and metadata with other sizes and every weight zero, the norms'
// included (finite: a model that runs, and predicts every token alike). Written with write_sparse,
// a model of gigabytes takes a few KB of disk.
inline TinyLlamaGguf zero_llama_gguf(int64_t layers, int64_t hidden, int64_t heads,
                                     int64_t kv_heads, int64_t ffn) {
  TinyLlamaGguf g = tiny_llama_gguf();
  const int64_t head_dim = hidden / heads, kv = kv_heads * head_dim;
  g.set("llama.block_count", gguf_u32(static_cast<uint32_t>(layers)))
      .set("llama.embedding_length", gguf_u32(static_cast<uint32_t>(hidden)))
      .set("llama.feed_forward_length", gguf_u32(static_cast<uint32_t>(ffn)))
      .set("llama.attention.head_count", gguf_u32(static_cast<uint32_t>(heads)))
      .set("llama.attention.head_count_kv", gguf_u32(static_cast<uint32_t>(kv_heads)))
      .set("llama.rope.dimension_count", gguf_u32(static_cast<uint32_t>(head_dim)));
  const auto vocab = static_cast<uint64_t>(tiny_llama_tokens().size());
  const auto h = static_cast<uint64_t>(hidden), f = static_cast<uint64_t>(ffn);
  g.tensors = {{"token_embd.weight", {h, vocab}, {}}};
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const auto& [name, ne] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"attn_norm.weight", {h}},
             {"attn_q.weight", {h, h}},
             {"attn_k.weight", {h, static_cast<uint64_t>(kv)}},
             {"attn_v.weight", {h, static_cast<uint64_t>(kv)}},
             {"attn_output.weight", {h, h}},
             {"ffn_norm.weight", {h}},
             {"ffn_gate.weight", {h, f}},
             {"ffn_up.weight", {h, f}},
             {"ffn_down.weight", {f, h}}})
      g.tensors.push_back({p + name, ne, {}});
  }
  g.tensors.push_back({"output_norm.weight", {h}, {}});
  return g;
}

}  // namespace qkv::test
