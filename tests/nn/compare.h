// Comparisons shared by the nn layer tests: float32 results against the float64 reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "qkv/tensor.h"

namespace qkv::test {

// max |a − b| over all entries (either dtype), +∞ when the shapes differ.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::abs(a.value(i) - b.value(i)));
  return worst;
}

// max |a| over all entries.
inline double max_abs(const Tensor& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.value(i)));
  return m;
}

// "1.23e-10": a measured error for RecordProperty (--gtest_output=xml keeps it).
inline std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", x);
  return buf;
}

}  // namespace qkv::test
