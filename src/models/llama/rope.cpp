// RoPE (Su et al. 2021, "RoFormer") as llama.cpp's ggml_rope_ext applies it to a GGUF decoder:
// the first `dims` dimensions of each head turn in pairs — (2i, 2i + 1) for llama's files, (i,
// i + dims/2) for the NeoX-style architectures — by the angle pos·scale·base^(−2i/dims) / factor_i,
// where scale = 1 / the linear scaling factor and factor_i is Llama 3.1's rope_freqs.weight (1
// without it); the other dimensions pass unturned. A sliding layer (Gemma 3's local layers) has
// its own base and no scaling.
#include <cmath>

#include "models/llama/llama.h"
#include "qkv/threads.h"

namespace qkv {

RopeTable rope_table(const LlamaConfig& c, const LlamaWeights& w, int64_t layer, int64_t start,
                     int64_t n) {
  const bool slides = !c.sliding.empty() && c.sliding[static_cast<std::size_t>(layer)];
  const double base = slides ? c.rope_base_sliding : c.rope_base;
  const double scale = slides ? 1.0 : 1.0 / c.rope_scale;
  const int64_t half = c.rope_dims / 2;
  RopeTable t{.n = n, .d = c.head_dim, .dims = c.rope_dims, .pairing = c.rope_pairing};
  t.cos.resize(static_cast<std::size_t>(n * half));
  t.sin.resize(t.cos.size());
  for (int64_t i = 0; i < half; ++i) {
    double frequency =
        scale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(c.rope_dims));
    if (!w.rope_factors.empty() && !slides) frequency /= w.rope_factors[static_cast<std::size_t>(i)];
    for (int64_t p = 0; p < n; ++p) {
      const double angle = static_cast<double>(start + p) * frequency;
      t.cos[static_cast<std::size_t>(p * half + i)] = std::cos(angle);
      t.sin[static_cast<std::size_t>(p * half + i)] = std::sin(angle);
    }
  }
  return t;
}

void rope(Tensor& x, const RopeTable& table) {
  const int64_t heads = x.dim(1), n = x.dim(2), d = x.dim(3), half = table.dims / 2;
  if (n != table.n || d != table.d)
    throw Error("rope: " + std::to_string(n) + " positions of dimension " + std::to_string(d) +
                "; the table is for " + std::to_string(table.n) + " of " + std::to_string(table.d));
  // Pair i's two dimensions: adjacent (2i, 2i + 1), or halves (i, i + dims/2).
  const bool adjacent = table.pairing == RopePairing::adjacent;
  const int64_t step = adjacent ? 2 : 1, other = adjacent ? 1 : half;
  parallel_for(heads, resolve_num_threads(0), [&](int64_t h, int) {
    float* p = x.data<float>() + h * n * d;
    for (int64_t t = 0; t < n; ++t, p += d)
      for (int64_t i = 0; i < half; ++i) {
        const double c = table.cos[static_cast<std::size_t>(t * half + i)];
        const double s = table.sin[static_cast<std::size_t>(t * half + i)];
        float& a = p[i * step];
        float& b = p[i * step + other];
        const double a0 = a, b0 = b;
        a = static_cast<float>(a0 * c - b0 * s);
        b = static_cast<float>(a0 * s + b0 * c);
      }
  });
}

}  // namespace qkv
