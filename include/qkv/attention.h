// qkv/attention.h — exact attention of every classic kind, forward and backward.
//
//   out = normalize(scale · score(Q, K) + mask) · V
//
// Layout: q [B, Hq, L, Dq], k [B, Hkv, S, Dk], v [B, Hkv, S, Dv], out [B, Hq, L, Dv]; rank-3
// inputs are [H, L, D] and rank-2 inputs [L, D] (B = H = 1), and results keep q's rank. Query head
// h reads key/value head h / (Hq / Hkv) (grouped-query attention; Hkv = 1 is multi-query).
//
// Masks (PyTorch SDPA convention): a bool mask is true where a query may attend to a key; a float
// mask is added to the scores (−∞ masks). Either broadcasts to [B, Hq, L, S] (aligned at the last
// dimension, each size 1 or equal). `causal` and `key_lengths` combine with the mask by AND.
// A row with nothing to attend to gives output 0, weights 0, logsumexp −∞ and gradient 0.
// NaN or ∞ in q_i or in a visible k_j makes row i's weights and output NaN; NaN or ∞ in a visible
// v_j makes row i's output NaN. Masked keys are never read.
// Empty sizes are valid problems, never errors: B, H or L = 0 gives empty results (as PyTorch's
// SDPA); S = 0 leaves every row nothing to attend to (output 0, as above, where SDPA gives NaN);
// a head dim Dq = Dk = 0 makes every score q·k = 0, so softmax weighs the visible keys evenly (the
// default scale is then 1, not 1/√0); Dv = 0 gives rows of no columns. Gradients alike.
// Overflow: results are computed in the precision of the inputs (float32 when q, k and v all are,
// else float64). Where finite inputs give a visible score q·k, logit scale·q·k + mask or output
// beyond that precision's range (3.4e38 or 1.8e308), the row has no representable softmax: its
// output, weights, logsumexp and gradients are NaN, on every path alike (the float64 reference
// applies float32's range to float32 inputs). Scale such inputs down, or pass float64. A float
// mask is read in that precision too: on float32 inputs a float64 mask value below −3.4e38 is −∞,
// a mask, on every path (the fused kernels hold the mask in float32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention_types.h"
#include "qkv/device.h"
#include "qkv/tensor.h"

namespace qkv {

// Names as the command line spells them: "scaled-dot", "top-left", ...
std::string_view to_string(Score score);
std::string_view to_string(Normalize normalize);
std::string_view to_string(Causal causal);
std::string_view to_string(Path path);
std::string_view to_string(Precision precision);
std::optional<Score> parse_score(std::string_view name);
std::optional<Normalize> parse_normalize(std::string_view name);
std::optional<Causal> parse_causal(std::string_view name);
std::optional<Path> parse_path(std::string_view name);
std::optional<Precision> parse_precision(std::string_view name);
const std::vector<Score>& all_scores();

// The scale used when AttentionOptions::scale is empty: 1/√dk for scaled_dot, else 1.
double default_scale(Score score, int64_t dk);

// Learned parameters of `general` and `additive`, shared by every batch and head.
struct ScoreParams {
  Tensor w;    // general: W [Dq, Dk]
  Tensor w_q;  // additive: W_q [A, Dq]
  Tensor w_k;  // additive: W_k [A, Dk]
  Tensor v;    // additive: v [A]
};

struct AttentionOptions {
  Score score = Score::scaled_dot;
  std::optional<double> scale;  // any finite value; empty → default_scale(score, Dk)
  Normalize normalize = Normalize::softmax;
  Causal causal = Causal::none;
  Tensor mask;                       // optional: bool or float, broadcast to [B, Hq, L, S]
  std::vector<int64_t> key_lengths;  // optional, one per batch: keys j ≥ key_lengths[b] are masked
  ScoreParams params;                // for general and additive
  bool need_weights = false;         // fill AttentionResult::weights
  bool need_logsumexp = false;       // fill AttentionResult::logsumexp
  bool need_scores = false;          // fill AttentionResult::scores and ::logits
  // Fill AttentionResult::saved_max and ::saved_sum where the fused path runs, so that
  // attention_backward(dout, q, k, v, forward, options) need not run the forward again.
  bool keep_for_backward = false;
  Path path = Path::automatic;
  Precision precision = Precision::fp32;  // bf16: opt-in reduced precision (attention_types.h)
  int num_threads = 0;  // 0: $QKV_NUM_THREADS if set, else the machine's cores
};

// What a forward was computed from, so that a backward given that forward can tell whether it is
// its own: each input's dtype and shape, and a 64-bit hash of its values, beside the options that
// change the result. attention() records it with keep_for_backward, and the backward that is
// given the forward refuses one recorded from other inputs or options, whose saved softmax would
// otherwise give wrong gradients without a sign. Values, not addresses: an array changed in place
// between the forward and the backward is another input. The hash (not cryptographic) catches
// mistakes, not an adversary who crafts a collision.
struct ForwardFingerprint {
  bool recorded = false;
  struct Input {
    DType dtype = DType::f32;
    Shape shape;
    uint64_t values = 0;  // tensor_values_hash
    bool defined = false;
    bool operator==(const Input&) const = default;
  };
  Input query, key, value, mask;
  uint64_t key_lengths = 0;  // a hash of options.key_lengths
  uint64_t params = 0;       // a hash of options.params, each tensor's dtype, shape and values
  Score score = Score::scaled_dot;
  double scale = 0;  // as applied: default_scale(score, Dk) when options.scale is empty
  Normalize normalize = Normalize::softmax;
  Causal causal = Causal::none;
  Precision precision = Precision::fp32;
};

// The record of q, k, v and options (recorded = true). Reads every element once.
ForwardFingerprint fingerprint_of(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionOptions& options);
// How the forward's record differs from this call's, as the end of "the saved forward was
// computed ...": "from another key: float32 [2, 6, 8], not float32 [2, 7, 8]", "with causal
// top-left, not none"; empty when they are the same.
std::string fingerprint_difference(const ForwardFingerprint& forward,
                                   const ForwardFingerprint& now);
// A 64-bit hash of t's dtype, shape and values in row-major order (strides do not matter: a view
// and its contiguous copy hash alike); 0 for an undefined tensor.
uint64_t tensor_values_hash(const Tensor& t);

// Results are float64 when any of q, k, v is float64, else float32.
struct AttentionResult {
  Tensor out;        // [B, Hq, L, Dv]
  Tensor weights;    // [B, Hq, L, S]   normalize(logits); rows sum to 1 under softmax
  Tensor logsumexp;  // [B, Hq, L]      log Σ_j exp(logits_ij); −∞ for a fully masked row
  Tensor scores;     // [B, Hq, L, S]   score(q_i, k_j), before scale and mask
  Tensor logits;     // [B, Hq, L, S]   scale · scores + float mask; −∞ where masked
  // [B, Hq, L] float32, with keep_for_backward on the fused path: each row's softmax as the
  // kernels formed it (its largest exponent, in the kernels' units, and the sum of the exponentials
  // below it): what the backward needs beside `out` to skip the forward. Undefined elsewhere.
  Tensor saved_max, saved_sum;
  // With keep_for_backward (on either path): what the forward was computed from.
  ForwardFingerprint fingerprint;
};

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& options = {});

// The names validation messages give the arguments; a command line passes its own ("--keys K.npy").
struct ArgumentNames {
  std::string q = "q", k = "k", v = "v", mask = "mask", key_lengths = "key_lengths";
  std::string scale = "scale", w = "params.w", w_q = "params.w_q", w_k = "params.w_k",
              v_param = "params.v";
};
// What qkv::attention checks before it computes: throws qkv::Error (Kind::invalid_argument), one
// line naming the argument, what was found and what was expected, unless q, k, v and options make
// a valid problem.
void check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionOptions& options, const ArgumentNames& names = {});
// The path qkv::attention takes for these inputs: Path::fused, Path::reference, or Path::cuda
// where asked. Path::fused or Path::cuda asked for where it does not apply is a qkv::Error that
// says why.
Path chosen_path(const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionOptions& options);

// One attention computation with every intermediate kept: what a model's layer captures
// (nn::MultiHeadAttention, BERT, the seq2seq models qkv trains, `qkv attend`) and what explain
// shows. Shapes are [B, H, L, ·] as computed, or [H, L, ·] for one batch entry (the report).
// q, k, v are exactly what qkv::attention received: the projections split into heads, before any
// scaling. Fields a producer did not keep stay undefined.
struct AttentionCapture {
  Score score = Score::scaled_dot;
  double scale = 0;  // logits = scale·scores (default_scale(score, Dk) unless set)
  Causal causal = Causal::none;
  Normalize normalize = Normalize::softmax;
  Tensor q;        // [B, H, L, Dk]
  Tensor k;        // [B, Hkv, S, Dk]  (query head h reads key head h·Hkv/H)
  Tensor v;        // [B, Hkv, S, Dv]
  // The keep-mask the forward applied beside `causal` (bool, broadcast to [B, H, L, S]; a
  // sliding window's), or undefined: none. Recomputed weights (qkv/attention_weights.h) need it.
  Tensor mask;
  Tensor scores;   // [B, H, L, S] score(q_i, k_j), before scale and mask (masked keys included)
  Tensor logits;   // [B, H, L, S] scale·scores + mask; −∞ (not a finite sentinel) where masked
  Tensor weights;  // [B, H, L, S] normalize(logits) over the keys, 0 where masked; before dropout
  Tensor head_out;  // [B, H, L, Dv] Σ_j weights_ij·v_j per head (after dropout), before W_O
  // Where the L×S matrices were not kept (a long input on the fused path): each row's softmax as
  // the fused kernel formed it, [B, H, L] float32 (AttentionResult::saved_max, ::saved_sum), from
  // which qkv/attention_weights.h recomputes any weight exactly from q and k.
  Tensor saved_max, saved_sum;
};

// Gradients of a loss with respect to every input, given dout = ∂loss/∂out. Each has the shape
// and dtype of what it differentiates; dparams fills the fields the score uses.
struct AttentionGrads {
  Tensor dq, dk, dv;
  ScoreParams dparams;
  double dscale = 0;  // ∂loss/∂scale (laplace: ∂/∂(1/ℓ), cosine: ∂/∂(1/τ))
};

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const AttentionOptions& options = {});
// The same, given what attention(q, k, v, options) returned for these very inputs with
// keep_for_backward: its out and saved softmax let the fused backward skip the forward pass (a
// quarter to a third of the work). The results are the same bits as without it. Where `forward`
// holds no saved softmax (the reference path, or keep_for_backward off), the forward runs again.
// A forward whose fingerprint shows other inputs or options is a qkv::Error
// (Kind::invalid_argument) that says what differs; so is a saved softmax without a fingerprint.
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const AttentionResult& forward,
                                  const AttentionOptions& options = {});

// ---- on the GPU (Path::cuda) ----
// Attention on tensors in GPU memory (qkv/device.h), the layout above: q, k, v of one type —
// float32 (CUDA cores, exact by the same rule as the CPU's fused path), bfloat16 or float16
// (tensor cores, float32 accumulation and softmax) — each with its last dimension contiguous.
// The options that apply: score scaled_dot or dot, scale, causal (both alignments), key_lengths
// and mask (host tensors, copied to the device), softmax. Asynchronous on `stream`: the results
// are there when the stream's work is.
struct DeviceAttention {
  DeviceTensor q, k, v;
  DeviceTensor mask;       // optional: bool, or float32 added to the logits; broadcast to
                           // [B, Hq, L, S]; not both this and options.mask
  DeviceTensor out;        // [B, Hq, L, Dv] (q's rank), q's dtype, contiguous: written
  DeviceTensor logsumexp;  // optional [B, Hq, L] float32, contiguous: written
  void* stream = nullptr;  // a cudaStream_t; null: the default stream
};
void attention(const DeviceAttention& args, const AttentionOptions& options = {});

// Gradients on the GPU, given the forward's out and logsumexp for these very inputs (as
// DeviceAttention wrote them). dq, dk, dv: q's, k's and v's shapes and dtype, contiguous:
// written. Deterministic: the same inputs give the same bits on every run.
struct DeviceAttentionBackward {
  DeviceTensor dout, q, k, v, mask, out, logsumexp;
  DeviceTensor dq, dk, dv;
  void* stream = nullptr;
};
void attention_backward(const DeviceAttentionBackward& args, const AttentionOptions& options = {});

// ---- what a call needs (qkv/memory.h) ----
// Peak bytes attention(q, k, v, options) allocates beyond its inputs, known before it runs: what
// the caller compares with a memory limit (`qkv attend --memory-limit`, Python's memory_limit).
// The fused path needs O((L + S)·D) (the output, K and V packed once, the mask as float32); the
// float64 reference path copies its inputs to float64 and keeps, only where asked, the L×S
// matrices — weights (need_weights), scores and logits (need_scores), the masks as one float64
// bias — each converted once more to float32 for float32 inputs (measured at L = S = 1024: 36
// bytes a weight with all three kept, 44 with a mask). Products of sizes are taken in floating
// point and saturate at kMaxBytes. Throws what check_attention throws for an invalid problem.
int64_t attention_bytes(const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttentionOptions& options = {});
// The same for attention_backward(dout, q, k, v, options): the gradients, the forward it runs
// again (or reads from a saved forward), and on the fused path each worker's rows of its group.
int64_t attention_backward_bytes(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const AttentionOptions& options = {});

}  // namespace qkv
