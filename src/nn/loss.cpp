// Cross-entropy of softmax(logits) with label smoothing, and its gradient.
#include <cmath>
#include <limits>
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

// One pass per counted row, in float64 whatever T is (a row is a vocabulary, not a hot loop):
//   lse = m + log Σ_j exp(x_j − m), m = max_j x_j  (no overflow: every exponent is ≤ 0)
//   log p_j = x_j − lse
//   loss = −Σ_j q_j log p_j with q = (1 − ε)·one-hot(t) + ε/V
//        = −(1 − ε)·log p_t − (ε/V)·(Σ_j x_j − V·lse)
//   ∂loss/∂x_j = p_j − q_j (softmax's Jacobian applied to −q/p), divided by the count here.
// Rows whose target is −1 contribute nothing and get a zero gradient.
template <class T>
void softmax_cross_entropy(T* dlogits, const T* logits, const std::vector<int32_t>& targets,
                           int64_t v, double eps, int64_t count, CrossEntropy& result) {
  const double smooth = eps / static_cast<double>(v);
  double total = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const T* x = logits + static_cast<int64_t>(i) * v;
    T* dx = dlogits + static_cast<int64_t>(i) * v;
    const int32_t t = targets[i];
    if (t < 0) continue;  // dlogits starts zero-filled
    double m = -std::numeric_limits<double>::infinity(), sum_x = 0;
    int64_t argmax = 0;
    for (int64_t j = 0; j < v; ++j) {
      if (x[j] > m) {  // the first maximum on ties
        m = x[j];
        argmax = j;
      }
      sum_x += x[j];
    }
    double sum_exp = 0;
    for (int64_t j = 0; j < v; ++j) sum_exp += std::exp(x[j] - m);
    const double lse = m + std::log(sum_exp);
    total += -(1.0 - eps) * (x[t] - lse) - smooth * (sum_x - static_cast<double>(v) * lse);
    result.correct += argmax == t;
    const double inv_count = 1.0 / static_cast<double>(count);
    for (int64_t j = 0; j < v; ++j) {
      const double q = smooth + (j == t ? 1.0 - eps : 0.0);
      dx[j] = static_cast<T>((std::exp(x[j] - lse) - q) * inv_count);
    }
  }
  result.loss = total / static_cast<double>(count);
}

}  // namespace

CrossEntropy cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets,
                           double label_smoothing) {
  if (!logits.defined() || logits.rank() != 2 ||
      (logits.dtype() != DType::f32 && logits.dtype() != DType::f64))
    throw Error("cross_entropy: logits must be a [N, V] float32 or float64 tensor, got " +
                (logits.defined() ? shape_str(logits.shape()) : std::string("undefined")));
  const int64_t n = logits.dim(0), v = logits.dim(1);
  if (static_cast<int64_t>(targets.size()) != n)
    throw Error("cross_entropy: " + std::to_string(targets.size()) + " targets for logits " +
                shape_str(logits.shape()) + " (one per row expected)");
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw Error("cross_entropy: label_smoothing is " + std::to_string(label_smoothing) +
                " but must be in [0, 1]");
  CrossEntropy result;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < -1 || targets[i] >= v)
      throw Error("cross_entropy: target " + std::to_string(targets[i]) + " at row " +
                  std::to_string(i) + " is outside [0, " + std::to_string(v) +
                  ") (−1 ignores a row)");
    result.count += targets[i] >= 0;
  }
  result.dlogits = Tensor(logits.shape(), logits.dtype());
  if (result.count == 0) return result;  // loss 0, gradient 0
  const Tensor x = logits.contiguous();
  dispatch_float(x.dtype(), [&]<class T>(T) {
    softmax_cross_entropy(result.dlogits.data<T>(), x.data<T>(), targets, v, label_smoothing,
                          result.count, result);
  });
  return result;
}

}  // namespace qkv::nn
