// tests/attention/attention_cuda_test.cpp — Path::cuda at the API: what the build and the machine
// say (qkv/device.h), the one-line errors of a problem the GPU path does not cover, the device
// tensors' checks, and DeviceArray's copies. Without a GPU the device tensors live in the SIMT
// emulator's memory (tests/kernels/cuda/emulated_backend.h), which the checks see as the GPU's.
// The numerical sweeps on Path::cuda are the CPU kernels' own (flash_forward_test.cpp,
// flash_backward_test.cpp: their Cuda instances).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/emulated_backend.h"
#include "qkv/attention.h"
#include "qkv/device.h"

namespace {

using namespace qkv;

Tensor normal(const Shape& shape, uint32_t seed) {
  Tensor t(shape, DType::f32);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>((x >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return t;
}

// The message of what `f` throws, and its kind; "" when it throws nothing.
template <class F>
std::pair<std::string, Error::Kind> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.what(), e.kind()};
  }
  return {"", Error::Kind::invalid_argument};
}

TEST(CudaDevice, SaysWhetherItIsBuiltAndPresent) {
  const CudaDevice d = cuda_device();
  ASSERT_FALSE(d.description.empty());
  if (!d.built) {
    EXPECT_FALSE(d.present);
    EXPECT_NE(d.description.find("built without CUDA"), std::string::npos) << d.description;
  } else if (!d.present) {
    EXPECT_EQ(d.description.rfind("no CUDA device: ", 0), 0u) << d.description;
  } else {
    EXPECT_NE(d.description.find(", sm_"), std::string::npos) << d.description;
  }
}

TEST(CudaPath, WithoutAGpuItSaysWhyInOneLine) {
  if (cuda_device().present) GTEST_SKIP() << "a GPU is present: " << cuda_device().description;
  const Tensor q = normal({2, 4, 8}, 1), k = normal({2, 5, 8}, 2), v = normal({2, 5, 8}, 3);
  const auto [message, kind] = error_of([&] { attention(q, k, v, {.path = Path::cuda}); });
  EXPECT_EQ(kind, Error::Kind::runtime);
  EXPECT_EQ(message.rfind("path cuda: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  const auto [back, back_kind] = error_of([&] {
    attention_backward(normal({2, 4, 8}, 4), q, k, v, {.path = Path::cuda});
  });
  EXPECT_EQ(back, message);
  EXPECT_EQ(back_kind, Error::Kind::runtime);
  // A DeviceArray needs the GPU as well.
  const auto [array, array_kind] = error_of([] { DeviceArray a({4}, DeviceDType::f32); });
  EXPECT_EQ(array_kind, Error::Kind::runtime);
  EXPECT_FALSE(array.empty());
}

// What Path::cuda does not cover is a usage error, found before any GPU is looked for.
TEST(CudaPath, RefusesWhatItDoesNotCover) {
  const Tensor q = normal({2, 4, 8}, 1), k = normal({2, 5, 8}, 2), v = normal({2, 5, 8}, 3);
  struct Case {
    AttentionOptions options;
    Tensor q, k, v;
    std::string expected;
  };
  AttentionOptions additive{.score = Score::additive, .path = Path::cuda};
  additive.params = {.w_q = normal({3, 8}, 5), .w_k = normal({3, 8}, 6), .v = normal({3}, 7)};
  const std::vector<Case> cases = {
      {additive, q, k, v, "path cuda does not apply to score additive"},
      {{.normalize = Normalize::none, .path = Path::cuda},
       q,
       k,
       v,
       "path cuda does not apply to normalize none"},
      {{.need_weights = true, .path = Path::cuda},
       q,
       k,
       v,
       "path cuda does not apply to weights or scores"},
      {{.path = Path::cuda}, q.to(DType::f64), k, v, "path cuda does not apply to float64"},
      {{.path = Path::cuda},
       normal({2, 4, 300}, 1),
       normal({2, 5, 300}, 2),
       v,
       "path cuda takes head dims up to 256, not 300"},
  };
  for (const Case& c : cases) {
    const auto [message, kind] = error_of([&] { attention(c.q, c.k, c.v, c.options); });
    EXPECT_EQ(message.rfind(c.expected, 0), 0u) << message;
    EXPECT_EQ(kind, Error::Kind::invalid_argument) << message;
  }
}

#if defined(QKV_SIMT_EMULATOR)

// Device tensors in the emulator's memory (or the GPU's): the checks name the argument, what was
// found and what was expected.
TEST(CudaDeviceTensors, ChecksNameWhatIsWrong) {
  qkv_test::CudaOrEmulator device;
  const DeviceArray q({2, 3, 4, 8}, DeviceDType::f32), k({2, 3, 5, 8}, DeviceDType::f32),
      v({2, 3, 5, 8}, DeviceDType::f32), out({2, 3, 4, 8}, DeviceDType::f32),
      q16({2, 3, 4, 8}, DeviceDType::bf16), out_wrong({2, 3, 4, 7}, DeviceDType::f32),
      mask16({4, 5}, DeviceDType::f16);
  std::vector<float> host(2 * 3 * 4 * 8);
  DeviceTensor on_host = q.view();
  on_host.data = host.data();
  DeviceTensor strided = q.view();
  strided.strides = {96, 32, 1, 4};
  struct Case {
    DeviceAttention args;
    AttentionOptions options;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{.q = q16.view(), .k = k.view(), .v = v.view(), .out = out.view()},
       {},
       "q is bfloat16 [2, 3, 4, 8], k is float32 [2, 3, 5, 8], v is float32 [2, 3, 5, 8]; "
       "expected one dtype for all three"},
      {{.q = q.view(), .k = k.view(), .v = v.view(), .out = out_wrong.view()},
       {},
       "out is float32 [2, 3, 4, 7]; expected contiguous float32 [2, 3, 4, 8]"},
      {{.q = strided, .k = k.view(), .v = v.view(), .out = out.view()},
       {},
       "q has strides [96, 32, 1, 4]; expected its last dimension contiguous (stride 1)"},
      {{.q = q.view(), .k = k.view(), .v = v.view(), .out = out.view()},
       {.precision = Precision::bf16},
       "precision bf16 with float32 device tensors; the dtype decides there"},
      {{.q = q.view(), .k = k.view(), .v = v.view(), .out = out.view()},
       {.path = Path::fused},
       "path fused runs on the CPU; device tensors take path cuda (or auto)"},
      {{.q = q.view(), .k = k.view(), .v = v.view(), .mask = mask16.view(), .out = out.view()},
       {},
       "mask is float16 [4, 5]; expected bool or float32"},
      {{.q = q.view(), .k = k.view(), .v = v.view(), .out = out.view()},
       {.key_lengths = {5, 6}},
       "key_lengths has length 6; expected 0 to 5 (the number of keys)"},
      {{.q = on_host, .k = k.view(), .v = v.view(), .out = out.view()},
       {},
       "q is not GPU memory; expected a device pointer"},
  };
  for (const Case& c : cases) {
    const auto [message, kind] = error_of([&] { attention(c.args, c.options); });
    EXPECT_EQ(message.rfind(c.expected, 0), 0u) << message;
    EXPECT_EQ(kind, Error::Kind::invalid_argument) << message;
  }
}

TEST(CudaDeviceTensors, DeviceArrayCopiesRoundBf16AndF16ToNearestEven) {
  qkv_test::CudaOrEmulator device;
  // 1 + 2⁻⁸ lies halfway between two bf16 neighbours (1 and 1 + 2⁻⁷): ties go to the even one, 1.
  // 1 + 3·2⁻⁸ lies halfway between 1 + 2⁻⁷ and 1 + 2⁻⁶: to 1 + 2⁻⁶. For f16 (10 bits) the same at
  // 2⁻¹¹ and 3·2⁻¹¹. 70000 overflows f16 (to ∞) but not bf16.
  const Tensor x = Tensor::from({6}, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f,
                                      1.0f + 3 * 0x1p-11f, 70000.0f, -0.0f});
  const Tensor b = DeviceArray::from_host(x, DeviceDType::bf16).to_host();
  const Tensor h = DeviceArray::from_host(x, DeviceDType::f16).to_host();
  const Tensor f = DeviceArray::from_host(x, DeviceDType::f32).to_host();
  const std::vector<float> want_b{1.0f, 1.0f + 0x1p-6f, 1.0f, 1.0f, 70144.0f, -0.0f};
  const std::vector<float> want_h{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f,
                                  1.0f + 0x1p-9f, INFINITY,           -0.0f};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(b.data<float>()[i], want_b[i]) << "bf16 of " << x.data<float>()[i];
    EXPECT_EQ(h.data<float>()[i], want_h[i]) << "f16 of " << x.data<float>()[i];
    EXPECT_EQ(f.data<float>()[i], x.data<float>()[i]);
  }
  EXPECT_TRUE(std::signbit(b.data<float>()[5]) && std::signbit(h.data<float>()[5]));
  // f16 subnormals are kept: 2⁻²⁴ is the smallest, 2⁻²⁵ ties to even (0), 3·2⁻²⁵ to 2·2⁻²⁴.
  const Tensor tiny = Tensor::from({3}, {0x1p-24f, 0x1p-25f, 3 * 0x1p-25f});
  const Tensor t = DeviceArray::from_host(tiny, DeviceDType::f16).to_host();
  EXPECT_EQ(t.data<float>()[0], 0x1p-24f);
  EXPECT_EQ(t.data<float>()[1], 0.0f);
  EXPECT_EQ(t.data<float>()[2], 0x1p-23f);
  // So are bf16's, as the kernels' rounding and the GPU's keep them (the CPU's bf16 path flushes
  // them, for vdpbf16ps): 2⁻¹³⁰ is one; 2⁻¹³⁴ ties to even (0), 3·2⁻¹³⁴ to 2·2⁻¹³³.
  const Tensor tiny_b = Tensor::from({3}, {0x1p-130f, 0x1p-134f, 0x1.8p-133f});
  const Tensor tb = DeviceArray::from_host(tiny_b, DeviceDType::bf16).to_host();
  EXPECT_EQ(tb.data<float>()[0], 0x1p-130f);
  EXPECT_EQ(tb.data<float>()[1], 0.0f);
  EXPECT_EQ(tb.data<float>()[2], 0x1p-132f);
}

// The device API against the host tensors' Path::cuda, which runs the same kernels: the same bits
// forward; backward, the device API's rows come from the logsumexp alone (FlashAttention's own
// input) where the host path keeps the forward's exact rows, so they may differ by the
// logsumexp's rounding, |lse|·2⁻²⁴ relative, in each P.
TEST(CudaDeviceTensors, ForwardAndBackwardAgreeWithTheHostPath) {
  qkv_test::CudaOrEmulator device;
  const int64_t B = 2, Hq = 4, Hkv = 2, L = 70, S = 90, D = 40;
  const Tensor q = normal({B, Hq, L, D}, 11), k = normal({B, Hkv, S, D}, 12),
               v = normal({B, Hkv, S, D}, 13), dout = normal({B, Hq, L, D}, 14);
  Tensor keep({L, S}, DType::b8);
  for (int64_t i = 0; i < L * S; ++i) keep.data<bool>()[i] = (i * 7919) % 5 != 0;
  for (int64_t j = 0; j < S; ++j) keep.at<bool>(3, j) = false;  // a row that sees nothing
  AttentionOptions host{.causal = Causal::bottom_right,
                        .mask = keep,
                        .key_lengths = {80, 90},
                        .need_logsumexp = true,
                        .path = Path::cuda};
  const AttentionResult want = attention(q, k, v, host);
  const AttentionGrads want_g = attention_backward(dout, q, k, v, host);

  const DeviceArray dq_in = DeviceArray::from_host(q, DeviceDType::f32),
                    dk_in = DeviceArray::from_host(k, DeviceDType::f32),
                    dv_in = DeviceArray::from_host(v, DeviceDType::f32),
                    ddout = DeviceArray::from_host(dout, DeviceDType::f32),
                    dmask = DeviceArray::from_host(keep, DeviceDType::b8);
  const DeviceArray out({B, Hq, L, D}, DeviceDType::f32), lse({B, Hq, L}, DeviceDType::f32);
  AttentionOptions o{.causal = Causal::bottom_right, .key_lengths = {80, 90}};
  attention(DeviceAttention{.q = dq_in.view(),
                            .k = dk_in.view(),
                            .v = dv_in.view(),
                            .mask = dmask.view(),
                            .out = out.view(),
                            .logsumexp = lse.view()},
            o);
  const Tensor got = out.to_host(), got_lse = lse.to_host();
  ASSERT_EQ(got.numel(), want.out.numel());
  EXPECT_EQ(std::memcmp(got.data<float>(), want.out.data<float>(), 4 * got.numel()), 0);
  EXPECT_EQ(std::memcmp(got_lse.data<float>(), want.logsumexp.data<float>(), 4 * got_lse.numel()),
            0);
  EXPECT_EQ(got.at<float>(0, 0, 3, 0), 0.0f);  // the row that sees nothing
  EXPECT_EQ(got_lse.at<float>(0, 0, 3), -INFINITY);

  const DeviceArray gq({B, Hq, L, D}, DeviceDType::f32), gk({B, Hkv, S, D}, DeviceDType::f32),
      gv({B, Hkv, S, D}, DeviceDType::f32);
  attention_backward(DeviceAttentionBackward{.dout = ddout.view(),
                                             .q = dq_in.view(),
                                             .k = dk_in.view(),
                                             .v = dv_in.view(),
                                             .mask = dmask.view(),
                                             .out = out.view(),
                                             .logsumexp = lse.view(),
                                             .dq = gq.view(),
                                             .dk = gk.view(),
                                             .dv = gv.view()},
                     o);
  for (const auto& [name, got_g, want_t] :
       {std::tuple{"dq", gq.to_host(), want_g.dq}, std::tuple{"dk", gk.to_host(), want_g.dk},
        std::tuple{"dv", gv.to_host(), want_g.dv}}) {
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < want_t.numel(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(want_t.data<float>()[i])));
      worst = std::max(
          worst, std::abs(static_cast<double>(got_g.data<float>()[i]) - want_t.data<float>()[i]));
    }
    EXPECT_GT(largest, 0.1) << name;
    EXPECT_LE(worst, 1e-5 * largest) << name << ": the device API's gradients against the host "
                                     << "path's, relative to the largest";
  }
}

// q as a [B, L, H, D] projection seen as [B, H, L, D] (strides, no copy) gives the bits of its
// contiguous copy.
TEST(CudaDeviceTensors, StridedQueriesGiveTheBitsOfTheirContiguousCopy) {
  qkv_test::CudaOrEmulator device;
  const int64_t B = 1, H = 3, L = 33, S = 40, D = 24;
  const Tensor q_blhd = normal({B, L, H, D}, 21), k = normal({B, H, S, D}, 22),
               v = normal({B, H, S, D}, 23);
  const Tensor q = q_blhd.transpose(1, 2);  // [B, H, L, D] view
  const DeviceArray dq_blhd = DeviceArray::from_host(q_blhd, DeviceDType::f32),
                    dq_dense = DeviceArray::from_host(q.contiguous(), DeviceDType::f32),
                    dk = DeviceArray::from_host(k, DeviceDType::f32),
                    dv = DeviceArray::from_host(v, DeviceDType::f32);
  DeviceTensor strided = dq_blhd.view();
  strided.shape = {B, H, L, D};
  strided.strides = {L * H * D, D, H * D, 1};
  const DeviceArray a({B, H, L, D}, DeviceDType::f32), b({B, H, L, D}, DeviceDType::f32);
  attention(DeviceAttention{.q = strided, .k = dk.view(), .v = dv.view(), .out = a.view()},
            {.causal = Causal::top_left});
  attention(DeviceAttention{.q = dq_dense.view(), .k = dk.view(), .v = dv.view(), .out = b.view()},
            {.causal = Causal::top_left});
  const Tensor x = a.to_host(), y = b.to_host();
  EXPECT_EQ(std::memcmp(x.data<float>(), y.data<float>(), 4 * x.numel()), 0);
  double largest = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    largest = std::max(largest, std::abs(1.0 * x.data<float>()[i]));
  EXPECT_GT(largest, 0.1);  // not two zero outputs
}

#endif

}  // namespace
