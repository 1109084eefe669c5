// Uses the installed qkv: one query against two keys with equal scores averages their values.
#include <qkv/attention.h>

#include <cstdio>

int main() {
  qkv::Tensor q = qkv::Tensor::from({1, 2}, {1.0f, 0.0f});
  qkv::Tensor k = qkv::Tensor::from({2, 2}, {0.0f, 1.0f, 0.0f, -1.0f});
  qkv::Tensor v = qkv::Tensor::from({2, 2}, {1.0f, 2.0f, 0.0f, 3.0f});
  qkv::AttentionResult r = qkv::attention(q, k, v, {.score = qkv::Score::dot});
  std::printf("out = %g %g\n", r.out.at<float>(0, 0), r.out.at<float>(0, 1));
  return 0;
}
