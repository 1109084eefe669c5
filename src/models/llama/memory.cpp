// What the decoder's work needs in memory (CausalLM::capture_bytes, generate_bytes): peak
// resident bytes of the process, counted from the config and the lengths as llama_forward
// allocates them (models/llama/llama.cpp). Every estimate is known once the file's header is read,
// before its weights are (CausalLM::open).
#include "qkv/memory.h"

#include <algorithm>

#include "models/llama/llama.h"
#include "models/text/gguf_tokenizer.h"
#include "qkv/model.h"

namespace qkv {
namespace {

// A vocabulary entry and its merge: strings and hash-map nodes, about 200 bytes on 64-bit
// libstdc++.
constexpr double kTokenBytes = 256;

// The process at its peak: the weights as loaded (a tensor's stored bytes are read a MiB at a
// time, never the whole file), the tokenizer, and the work.
int64_t peak(const CausalLM& model, double work) {
  return saturated_bytes(static_cast<double>(kProcessBytes + model.resident_bytes()) + work);
}

// One pass over n positions (float32): h and its normed copy, q, k, v, the attention output and
// W_O's, gate and up (ffn each) and down's output; the logits of every position (or of the last).
double pass_bytes(const LlamaConfig& c, double n, bool every_logit) {
  const double hid = static_cast<double>(c.hidden), ffn = static_cast<double>(c.ffn);
  const double kv = static_cast<double>(c.kv_heads * c.head_dim);
  const double q = std::max(hid, static_cast<double>(c.heads * c.head_dim));  // Qwen 3: wider
  return 4.0 * (n * (4 * hid + 2 * q + 2 * kv + 3 * ffn) +
                (every_logit ? n : 1.0) * static_cast<double>(c.vocab));
}

// The lens's float32 copies of W_Q, W_K, W_V and W_O where the model keeps blocks (LlamaResidual
// dequantizes a layer's matrix the first time a view reads it whole: attribution reads every
// layer's W_O, composition and circuits the layers of the heads they show): all of them, at most.
double lens_matrix_bytes(const LlamaConfig& c, WeightFormat format) {
  if (format == WeightFormat::float32) return 0;
  const double q = static_cast<double>(c.heads * c.head_dim),
               kv = static_cast<double>(c.kv_heads * c.head_dim);
  return 4.0 * static_cast<double>(c.layers) * static_cast<double>(c.hidden) * (2 * q + 2 * kv);
}

}  // namespace

int64_t CausalLM::resident_bytes() const {
  return saturated_bytes(static_cast<double>(weight_bytes_[static_cast<int>(format_)]) +
                         kTokenBytes * static_cast<double>(tokenizer_->size()));
}

int64_t CausalLM::load_bytes() const { return peak(*this, 0); }

int64_t CausalLM::capture_bytes(int64_t tokens) const {
  const LlamaConfig& c = *config_;
  const double n = static_cast<double>(tokens);
  const double heads = static_cast<double>(c.heads), layers = static_cast<double>(c.layers);
  // Kept per layer (float32, as the weights): scores, logits and weights (n² a head) and one more
  // matrix's worth for the allocator's slack; q, k and v (k and v repeated to every head by
  // explain) and the heads' outputs. While a layer runs: the reference's float64 scores, logits
  // and weights before the cast. The KV cache holds every position.
  const double hd = static_cast<double>(c.head_dim);
  const double kept = layers * (4 * heads * n * n * 4 + 6 * heads * n * hd * 4);
  const double working = 3 * heads * n * n * 8;
  const double cache = layers * 2 * static_cast<double>(c.kv_heads) * n * hd * 4;
  return peak(*this, kept + working + cache + pass_bytes(c, n, true) +
                        lens_matrix_bytes(c, format_));
}

int64_t CausalLM::capture_rows_bytes(int64_t tokens) const {
  const LlamaConfig& c = *config_;
  const double n = static_cast<double>(tokens), hd = static_cast<double>(c.head_dim);
  const double heads = static_cast<double>(c.heads), layers = static_cast<double>(c.layers);
  // Kept per layer (float32): q, k, v (k and v repeated to every head by explain) and the heads'
  // outputs, n·d a head each, and the rows' max and sum. While explain repeats one layer's k or v:
  // the cache's copy and its float32 copy, the repeat and its copy; and one layer's kept tensors
  // more for the allocator's slack (measured at 4,096 tokens: 22 MB above the kept and the pass).
  const double kept = layers * heads * n * (4 * hd + 2) * 4;
  const double kv = static_cast<double>(c.kv_heads);
  const double repeat = (2 * kv + 2 * heads) * n * hd * 4, slack = heads * n * 4 * hd * 4;
  return peak(*this, kept + repeat + slack + pass_bytes(c, n, false) +
                        lens_matrix_bytes(c, format_));
}

int64_t CausalLM::generate_bytes(int64_t positions) const {
  const LlamaConfig& c = *config_;
  const double n = static_cast<double>(std::min(positions, c.context));
  // The cache's capacity doubles as it fills (up to twice the positions), and while a layer's
  // grows the old one is alive too: three times the positions for one layer, two for the rest.
  const double position_bytes = 2.0 * static_cast<double>(c.kv_heads * c.head_dim) * 4;
  const double cache = (2 * static_cast<double>(c.layers) + 1) * n * position_bytes;
  // The prompt runs in one pass; the vocabulary's probabilities when sampling (float64).
  return peak(*this, cache + pass_bytes(c, n, false) + 8.0 * static_cast<double>(c.vocab));
}

}  // namespace qkv
