// What training and capturing a seq2seq model need in memory (seq2seq_train_bytes,
// seq2seq_capture_bytes): peak resident bytes of the process, from the config alone, so that
// `qkv train` can refuse a size before allocating any of it. The counts follow what the layers
// save for backward (src/nn/), rounded up where they are loose; tests/models compare them with
// measured peaks.
#include "qkv/memory.h"

#include <algorithm>

#include "qkv/model.h"

namespace qkv {
namespace {

constexpr double kFloat = 4;  // float32 parameters and activations

struct Sizes {
  double d, f, heads, dk, layers, vocab, source, target;  // target: T = max_target + 1 (EOS)
};

Sizes sizes_of(const Seq2SeqConfig& c) {
  const double d = static_cast<double>(c.d_model), heads = static_cast<double>(c.heads);
  return {.d = d,
          .f = static_cast<double>(c.hidden()),
          .heads = heads,
          .dk = d / heads,
          .layers = static_cast<double>(c.layers),
          .vocab = static_cast<double>(c.characters.size() + 3),
          .source = static_cast<double>(c.max_source),
          .target = static_cast<double>(c.max_target + 1)};
}

// Parameters, counted loosely high: the shared embedding and the output layer (V·d each), per
// encoder block self-attention (4d²) and the FFN (2·d·f), per decoder block self- and
// cross-attention (8d²) and the FFN; biases, norms and the scores' own matrices in the 10%.
// RNNsearch: the GRUs, the alignment model and the deep output, all O(d²), and three V·d.
double parameters(const Seq2SeqConfig& c, const Sizes& z) {
  if (c.architecture == Seq2SeqArchitecture::rnnsearch)
    return 1.1 * (16 * z.d * z.d + 3 * z.vocab * z.d);
  const double encoder = 4 * z.d * z.d + 2 * z.d * z.f;
  const double decoder = 8 * z.d * z.d + 2 * z.d * z.f;
  return 1.1 * (2 * z.vocab * z.d + z.layers * (encoder + decoder));
}

// Bytes a query-key pair of one head costs when the attention runs off the fused kernel (other
// scores, or weights asked for): the reference's float64 scores, logits, weights and gradient
// (the additive score also a d_k-wide tanh argument); 0 on the fused kernel, which keeps rows.
double pair_bytes(const Seq2SeqConfig& c, const Sizes& z, bool captured) {
  // RNNsearch's additive attention reads one query a step: its tanh work is counted with the
  // decoder's steps (example_bytes).
  if (c.architecture == Seq2SeqArchitecture::rnnsearch) return 5 * 8;
  const Score score = c.attention.score;
  if (score == Score::additive) return 5 * 8 + 3 * 8 * z.dk;
  if (captured || (score != Score::scaled_dot && score != Score::dot)) return 5 * 8;
  return 0;
}

// One example's activations, forward, as the layers save them for backward: per encoder block
// ~16 vectors of width d and 3 of width f a position, per decoder block ~24 and 3, the cross-
// attention's keys and values over the source; the attention pairs; the logits three times
// (logits, log-softmax, their gradient).
double example_bytes(const Seq2SeqConfig& c, const Sizes& z, bool captured) {
  const double pairs = pair_bytes(c, z, captured);
  const double s = z.source, t = z.target;
  double floats = 0;
  if (c.architecture == Seq2SeqArchitecture::rnnsearch) {
    // Encoder steps (both directions' gates and states), decoder steps (state, context, deep
    // output), and the additive score's tanh argument and value over every source position a
    // step.
    floats = 12 * s * z.d + t * (16 * z.d + 2 * s * z.d);
  } else {
    floats = 3 * (s + t) * z.d +
             z.layers * ((16 * s * z.d + 3 * s * z.f) + (24 * t * z.d + 3 * t * z.f + 2 * s * z.d));
  }
  floats += 3 * t * z.vocab;
  const double attention_pairs = c.architecture == Seq2SeqArchitecture::rnnsearch
                                     ? t * s
                                     : z.layers * (s * s + t * t + t * s) * z.heads;
  return floats * kFloat + attention_pairs * pairs;
}

}  // namespace

int64_t seq2seq_train_bytes(const Seq2SeqConfig& c, int64_t batch_size) {
  const Sizes z = sizes_of(c);
  // Value, gradient and AdamW's two moments a parameter.
  const double weights = 4 * kFloat * parameters(c, z);
  // A training step keeps the batch's forward and, while backward runs, its gradients (the counts
  // above are loose enough to hold both: measured, a step's peak is 0.7 of them); evaluation
  // runs forward alone on batches of 256 (teacher-forced and greedy) — measured, 0.6 of a
  // training example's; 0.75 counted — with the logits copied to float64.
  const double b = static_cast<double>(batch_size);
  const double train = 1.1 * b * example_bytes(c, z, false);
  const double eval = 256 * (0.75 * example_bytes(c, z, false) + 8 * z.target * z.vocab);
  return saturated_bytes(static_cast<double>(kProcessBytes) + weights + std::max(train, eval));
}

int64_t seq2seq_capture_bytes(const Seq2SeqConfig& c) {
  const Sizes z = sizes_of(c);
  // The model loaded (its file read beside it), greedy decoding of one source, then one captured
  // pass: every attention pair's scores, logits and weights kept (and the reference's float64
  // copies of one layer while it runs), q, k, v and the heads' outputs.
  const double weights = 2 * kFloat * parameters(c, z);
  return saturated_bytes(static_cast<double>(kProcessBytes) + weights +
                         2 * example_bytes(c, z, true));
}

}  // namespace qkv
