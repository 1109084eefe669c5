// Embedding (a table lookup and its scatter-add backward) and the sinusoidal position table.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

// out[r] = table[ids[r]] — table: [V, D], out: [R, D].
template <class T>
void gather_rows(T* out, const T* table, const std::vector<std::vector<int32_t>>& ids, int64_t d) {
  for (const auto& row : ids)
    for (int32_t id : row) {
      std::copy(table + static_cast<int64_t>(id) * d, table + (static_cast<int64_t>(id) + 1) * d,
                out);
      out += d;
    }
}

// Forward was out[r] = table[ids[r]], so dtable[ids[r]] += dout[r] (a repeated id collects the sum
// of its rows, in order).
template <class T>
void scatter_add_rows(T* dtable, const T* dout, const std::vector<std::vector<int32_t>>& ids,
                      int64_t d) {
  for (const auto& row : ids)
    for (int32_t id : row) {
      T* dst = dtable + static_cast<int64_t>(id) * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += dout[j];
      dout += d;
    }
}

}  // namespace

Embedding::Embedding(std::string name, int64_t vocab, int64_t dim, Rng& rng, DType dtype)
    : weight(make_parameter(name + ".weight", {vocab, dim}, 1.0, rng, dtype)) {}

Tensor Embedding::forward(const std::vector<std::vector<int32_t>>& ids) {
  const int64_t vocab = weight.value.dim(0), d = weight.value.dim(1);
  const int64_t b = static_cast<int64_t>(ids.size());
  const int64_t l = ids.empty() ? 0 : static_cast<int64_t>(ids[0].size());
  for (int64_t i = 0; i < b; ++i) {
    if (static_cast<int64_t>(ids[i].size()) != l)
      throw Error("Embedding " + weight.name + ": sequence " + std::to_string(i) + " has " +
                  std::to_string(ids[i].size()) + " ids but sequence 0 has " + std::to_string(l) +
                  " (pad them to one length)");
    for (int64_t t = 0; t < l; ++t)
      if (ids[i][t] < 0 || ids[i][t] >= vocab)
        throw Error("Embedding " + weight.name + ": id " + std::to_string(ids[i][t]) + " at [" +
                    std::to_string(i) + ", " + std::to_string(t) +
                    "] is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  ids_ = ids;
  Tensor y({b, l, d}, weight.value.dtype());
  dispatch_float(y.dtype(),
                 [&]<class T>(T) { gather_rows(y.data<T>(), weight.value.data<T>(), ids_, d); });
  return y;
}

void Embedding::backward(const Tensor& dy) {
  const int64_t d = weight.value.dim(1);
  const int64_t b = static_cast<int64_t>(ids_.size());
  const int64_t l = ids_.empty() ? 0 : static_cast<int64_t>(ids_[0].size());
  if (dy.shape() != Shape{b, l, d} || dy.dtype() != weight.value.dtype())
    throw Error("Embedding " + weight.name + "::backward: dy has shape " + shape_str(dy.shape()) +
                " but the forward's output was " + shape_str({b, l, d}));
  const Tensor g = dy.contiguous();
  dispatch_float(g.dtype(), [&]<class T>(T) {
    scatter_add_rows(weight.grad.data<T>(), g.data<T>(), ids_, d);
  });
}

void Embedding::collect(std::vector<Parameter*>& out) { out.push_back(&weight); }

// Computed in float64, then converted: the float32 table is the correctly rounded one.
Tensor sinusoidal_positions(int64_t length, int64_t dim, DType dtype) {
  if (length < 0 || dim < 0)
    throw Error("sinusoidal_positions: length " + std::to_string(length) + " and dim " +
                std::to_string(dim) + " must be ≥ 0");
  Tensor pe({length, dim}, DType::f64);
  double* out = pe.data<double>();
  for (int64_t p = 0; p < length; ++p)
    for (int64_t i = 0; 2 * i < dim; ++i) {
      const double angle =
          static_cast<double>(p) / std::pow(10000.0, static_cast<double>(2 * i) / dim);
      out[p * dim + 2 * i] = std::sin(angle);
      if (2 * i + 1 < dim) out[p * dim + 2 * i + 1] = std::cos(angle);
    }
  return pe.to(dtype);
}

}  // namespace qkv::nn
