// Rng, Module and parameters: what every trainable layer shares.
#include <cmath>
#include <numbers>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {

// SplitMix64 (Steele, Lea & Flood 2014): tiny, fast, and every output of a seed is fixed.
uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {  // Box–Muller; one of the pair is dropped, which keeps the stream simple
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Rng::below(int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n));
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  collect(out);
  return out;
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) {
    Tensor& g = p->grad;
    dispatch_float(g.dtype(),
                   [&]<class T>(T) { std::fill(g.data<T>(), g.data<T>() + g.numel(), T(0)); });
  }
}

int64_t Module::parameter_count() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->value.numel();
  return n;
}

Parameter make_parameter(std::string name, Shape shape, double std, Rng& rng, DType dtype) {
  Tensor value(shape, DType::f64);
  for (int64_t i = 0; i < value.numel(); ++i)
    value.data<double>()[i] = std == 0 ? 0.0 : std * rng.normal();
  return {std::move(name), value.to(dtype), Tensor::full(shape, 0.0, dtype)};
}

}  // namespace qkv::nn
