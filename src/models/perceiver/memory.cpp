// What training and explaining a Perceiver need in memory (perceiver_train_bytes,
// perceiver_explain_bytes): peak resident bytes of the process, from the config alone, counted
// as Perceiver::forward and backward allocate (src/models/perceiver/perceiver.cpp), rounded up.
#include "qkv/memory.h"

#include <algorithm>

#include "qkv/perceiver.h"

namespace qkv {
namespace {

constexpr double kFloat = 4;  // float32 parameters and activations

// The embedding and the latents, the cross-attention (4d²) and its FFN (8d²), each latent block
// the same again, the classifier; norms and biases in the 10%.
double parameters(const PerceiverConfig& c) {
  const double d = static_cast<double>(c.d_model);
  return 1.1 * (static_cast<double>(c.vocab + c.latents + c.classes) * d +
                static_cast<double>(1 + c.blocks) * 12 * d * d);
}

// One input's activations, as forward saves them for backward: over the L positions the
// embedding, the positions added, the input norm's input and output, the keys and values (~8
// vectors of d a position, 10 counted), the ids; over the N latents ~24 vectors of d a block
// (attention, FFN of 4d, norms, residuals). Backward adds the gradients of the L positions'
// vectors (~5 of d).
double forward_bytes(const PerceiverConfig& c) {
  const double d = static_cast<double>(c.d_model), l = static_cast<double>(c.length);
  return kFloat * (10 * l * d + l + 24 * static_cast<double>(c.latents * (1 + c.blocks)) * d);
}
double example_bytes(const PerceiverConfig& c) {
  return forward_bytes(c) + kFloat * 5 * static_cast<double>(c.length * c.d_model);
}

}  // namespace

int64_t perceiver_train_bytes(const PerceiverConfig& c, int64_t batch_size) {
  // Value, gradient and AdamW's two moments a parameter; a training batch forward and backward;
  // the evaluation's batches of 64, forward only.
  const double weights = 4 * kFloat * parameters(c);
  const double batch = static_cast<double>(batch_size) * example_bytes(c);
  const double eval = 64 * forward_bytes(c);
  return saturated_bytes(static_cast<double>(kProcessBytes) + weights + std::max(batch, eval));
}

int64_t perceiver_explain_bytes(const PerceiverConfig& c) {
  // The model (its file read beside it) and one input forward with the cross-attention's weights
  // kept: the reference's float64 weights, the layer's copy in its dtype and the explanation's
  // float64 copy, [heads, latents, length] each.
  const double pairs = static_cast<double>(c.heads * c.latents) * static_cast<double>(c.length);
  return saturated_bytes(static_cast<double>(kProcessBytes) + 2 * kFloat * parameters(c) +
                         forward_bytes(c) + pairs * (8 + kFloat + 8 + 4));
}

}  // namespace qkv
