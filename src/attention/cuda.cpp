// Attention on the GPU (qkv/attention.h, "on the GPU"): the device tensors' checks — the host
// path's own messages, on shape-only stand-ins — and the calls into kernels/cuda.
#include "attention/cuda.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attention/fused.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"

namespace qkv {
namespace attention_detail {
namespace {

// A host tensor of t's shape whose data is never read: check_inputs and the mask's broadcast
// rules look at shapes and dtypes only.
Tensor stand_in(const DeviceTensor& t, DType dtype) {
  static double dummy = 0;
  const Shape strides(t.shape.size(), 0);
  return Tensor::borrow(&dummy, t.shape, strides, dtype, nullptr);
}

Shape strides_of(const DeviceTensor& t) {
  if (!t.strides.empty()) return t.strides;
  Shape s(t.shape.size(), 1);
  for (int i = static_cast<int>(t.shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * t.shape[i + 1];
  return s;
}

bool contiguous(const DeviceTensor& t) {
  const Shape s = strides_of(t);
  int64_t expected = 1;
  for (int i = static_cast<int>(t.shape.size()) - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && s[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

// [B, H, rows, cols] strides of a rank 2–4 view: dimensions missing on the left have stride 0.
cuda::Strided strided(const DeviceTensor& t) {
  cuda::Strided s;
  s.data = t.data;
  const Shape st = strides_of(t);
  const int r = static_cast<int>(st.size());
  for (int d = 0; d < 4; ++d) s.stride[d] = r - 4 + d >= 0 ? st[r - 4 + d] : 0;
  return s;
}

cuda::Element element_of(DeviceDType dtype) {
  return dtype == DeviceDType::bf16  ? cuda::Element::bf16
         : dtype == DeviceDType::f16 ? cuda::Element::f16
                                     : cuda::Element::f32;
}

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

std::string described(const std::string& name, const DeviceTensor& t) {
  return name + " is " + std::string(to_string(t.dtype)) + " " + shape_str(t.shape);
}

void need_gpu() {
  std::string why;
  if (!cuda::device_present(&why)) throw Error("path cuda: " + why, Error::Kind::runtime);
}

void check_device_memory(const std::string& name, const DeviceTensor& t) {
  if (t.numel() > 0 && !cuda::is_device_memory(t.data))
    fail(name +
         " is not GPU memory; expected a device pointer (a host tensor takes "
         "qkv::attention(q, k, v, {.path = Path::cuda}))");
}

// What the options may ask of the GPU's kernels.
void check_options(const AttentionOptions& o) {
  if (o.path != Path::automatic && o.path != Path::cuda)
    fail("path " + std::string(to_string(o.path)) +
         " runs on the CPU; device tensors take path cuda (or auto)");
  if (o.score != Score::scaled_dot && o.score != Score::dot)
    fail("score " + std::string(to_string(o.score)) +
         " on the GPU; expected scaled-dot or dot (the other scores run on the CPU)");
  if (o.normalize != Normalize::softmax) fail("normalize none on the GPU; expected softmax");
  if (o.need_weights || o.need_scores)
    fail(
        "weights or scores asked of the GPU path, which never stores the L×S matrix; expected "
        "need_weights and need_scores off (host tensors on the reference path keep them)");
}

// The device problem's checks: the host path's rules (shapes, heads, key lengths, the mask's
// broadcast) on stand-ins, then what the GPU adds. Returns the problem's dims.
Dims check_device(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                  const DeviceTensor& mask, const AttentionOptions& o) {
  check_options(o);
  for (const auto& [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}}) {
    if (!t->defined()) fail(std::string(name) + " is missing");
    if (t->dtype == DeviceDType::b8)
      fail(described(name, *t) + "; expected float32, bfloat16 or float16");
    if (!t->strides.empty() && t->strides.size() != t->shape.size())
      fail(std::string(name) + " has " + std::to_string(t->strides.size()) + " strides for shape " +
           shape_str(t->shape) + "; expected one per dimension");
  }
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    fail(described("q", q) + ", " + described("k", k) + ", " + described("v", v) +
         "; expected one dtype for all three");
  if (o.precision == Precision::bf16 && q.dtype != DeviceDType::bf16)
    fail("precision bf16 with " + std::string(to_string(q.dtype)) +
         " device tensors; the dtype decides there: pass bfloat16 tensors");
  if (mask.defined() && o.mask.defined())
    fail("both a device mask and options.mask; expected one of them");
  AttentionOptions shapes = o;
  shapes.path = Path::automatic;
  if (mask.defined()) {
    if (mask.dtype != DeviceDType::b8 && mask.dtype != DeviceDType::f32)
      fail(described("mask", mask) + "; expected bool or float32");
    shapes.mask = stand_in(mask, mask.dtype == DeviceDType::b8 ? DType::b8 : DType::f32);
  }
  const Dims d = check_inputs(stand_in(q, DType::f32), stand_in(k, DType::f32),
                              stand_in(v, DType::f32), shapes);
  for (const auto& [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}})
    if (!t->strides.empty() && !t->shape.empty() && t->shape.back() > 1 && t->strides.back() != 1)
      fail(std::string(name) + " has strides " + shape_str(t->strides) +
           "; expected its last dimension contiguous (stride 1)");
  if (d.Dq == 0 || d.Dv == 0) fail("a head dim of 0 on the GPU; expected D ≥ 1");
  if (d.Dq > 256 || d.Dv > 256)
    fail("head dims " + std::to_string(d.Dq) + " and " + std::to_string(d.Dv) +
         " on the GPU; expected at most 256 (larger heads run on the CPU)");
  for (int64_t n : {d.B * d.Hq, d.L, d.S})
    if (n > std::numeric_limits<int32_t>::max())
      fail("a size of " + grouped(n) + " on the GPU; expected below 2³¹");
  return d;
}

Shape result_shape(const Dims& d, bool with_d, int64_t D) {
  const Shape bhl{d.B, d.Hq, d.L};
  Shape s(bhl.begin() + (4 - d.rank), bhl.end());
  if (with_d) s.push_back(D);
  return s;
}

void check_output(const std::string& name, const DeviceTensor& t, const Shape& shape,
                  DeviceDType dtype) {
  if (!t.defined())
    fail(name + " is missing; expected " + std::string(to_string(dtype)) + " " + shape_str(shape) +
         " device memory to write");
  if (t.shape != shape || t.dtype != dtype || !contiguous(t))
    fail(described(name, t) + (contiguous(t) ? "" : " (strided)") + "; expected contiguous " +
         std::string(to_string(dtype)) + " " + shape_str(shape));
}

// What a call uploads beside the caller's tensors: the key lengths as int32 and a host mask.
struct Uploads {
  cuda::DeviceBuffer key_lengths, mask;
};

cuda::Problem problem_of(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                         const DeviceTensor& mask, const AttentionOptions& o, const Dims& d,
                         void* stream, Uploads& up) {
  cuda::Problem p;
  p.element = element_of(q.dtype);
  p.B = d.B, p.Hq = d.Hq, p.Hkv = d.Hkv, p.L = d.L, p.S = d.S, p.Dk = d.Dk, p.Dv = d.Dv;
  p.scale = static_cast<float>(o.scale.value_or(default_scale(o.score, d.Dk)));
  p.causal = o.causal;
  p.q = strided(q), p.k = strided(k), p.v = strided(v);
  p.stream = stream;
  if (!o.key_lengths.empty()) {
    std::vector<int32_t> lengths(o.key_lengths.begin(), o.key_lengths.end());
    up.key_lengths = cuda::DeviceBuffer(lengths.size() * sizeof(int32_t));
    cuda::copy_to_device(up.key_lengths.data(), lengths.data(), lengths.size() * 4, stream);
    p.key_lengths = static_cast<const int32_t*>(up.key_lengths.data());
  }
  const Tensor& host_mask = o.mask;
  if (mask.defined()) {
    p.mask_kind = mask.dtype == DeviceDType::b8 ? cuda::MaskKind::keep : cuda::MaskKind::bias;
    const Shape s = strides_of(mask);
    const int r = static_cast<int>(s.size());
    p.mask.data = mask.data;
    for (int i = 0; i < 4; ++i) {
      const int src = r - 4 + i;
      p.mask.stride[i] = src >= 0 && mask.shape[src] != 1 ? s[src] : 0;
    }
  } else if (host_mask.defined()) {
    // As float32 (a bool mask as bytes): what the kernels read, broadcast by strides.
    const bool keep = host_mask.dtype() == DType::b8;
    const Tensor c = keep ? host_mask.contiguous() : host_mask.to(DType::f32);
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * (keep ? 1 : 4);
    std::vector<unsigned char> staged(bytes);
    for (int64_t i = 0; keep && i < c.numel(); ++i) staged[i] = c.data<bool>()[i] ? 1 : 0;
    if (!keep && bytes > 0) std::memcpy(staged.data(), c.data<float>(), bytes);
    up.mask = cuda::DeviceBuffer(bytes);
    cuda::copy_to_device(up.mask.data(), staged.data(), bytes, stream);
    p.mask_kind = keep ? cuda::MaskKind::keep : cuda::MaskKind::bias;
    p.mask.data = up.mask.data();
    broadcast_strides(c.shape(), p.mask.stride);
  }
  return p;
}

// A rank 2–4 host tensor as a contiguous [B, H, rows, D] one (leading sizes 1), as the device
// copies are laid out.
Tensor as_rank4(const Tensor& t) {
  Shape s = t.shape();
  while (s.size() < 4) s.insert(s.begin(), 1);
  return t.contiguous().reshape(s);
}

}  // namespace

AttentionResult cuda_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& o, const Dims& d) {
  need_gpu();
  const DeviceDType type = o.precision == Precision::bf16 ? DeviceDType::bf16 : DeviceDType::f32;
  const DeviceArray dq = DeviceArray::from_host(as_rank4(q), type),
                    dk = DeviceArray::from_host(as_rank4(k), type),
                    dv = DeviceArray::from_host(as_rank4(v), type);
  DeviceArray out({d.B, d.Hq, d.L, d.Dv}, type), lse({d.B, d.Hq, d.L}, DeviceDType::f32);
  AttentionOptions device = o;
  device.precision = Precision::fp32;
  device.path = Path::cuda;
  attention(DeviceAttention{.q = dq.view(),
                            .k = dk.view(),
                            .v = dv.view(),
                            .out = out.view(),
                            .logsumexp = lse.view()},
            device);
  AttentionResult r;
  r.out = out.to_host().reshape(result_shape(d, true, d.Dv));
  if (o.need_logsumexp) r.logsumexp = lse.to_host().reshape(result_shape(d, false, 0));
  return r;
}

AttentionGrads cuda_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const AttentionOptions& o, const Dims& d) {
  need_gpu();
  const DeviceDType type = o.precision == Precision::bf16 ? DeviceDType::bf16 : DeviceDType::f32;
  const DeviceArray dq_in = DeviceArray::from_host(as_rank4(q), type),
                    dk_in = DeviceArray::from_host(as_rank4(k), type),
                    dv_in = DeviceArray::from_host(as_rank4(v), type),
                    ddout = DeviceArray::from_host(as_rank4(dout), type);
  const DeviceArray out({d.B, d.Hq, d.L, d.Dv}, type);
  const DeviceArray rows_max({d.B, d.Hq, d.L}, DeviceDType::f32),
      rows_log_sum({d.B, d.Hq, d.L}, DeviceDType::f32);
  const DeviceArray gq({d.B, d.Hq, d.L, d.Dk}, type), gk({d.B, d.Hkv, d.S, d.Dk}, type),
      gv({d.B, d.Hkv, d.S, d.Dv}, type);
  AttentionOptions device = o;
  device.precision = Precision::fp32;
  Uploads up;
  const cuda::Problem p =
      problem_of(dq_in.view(), dk_in.view(), dv_in.view(), {}, device, d, nullptr, up);
  // The forward's rows (max and log-sum in the kernels' units), so that the backward evaluates
  // its very exponents (flash_cuda.h, SoftmaxRows).
  const cuda::SoftmaxRows rows{static_cast<float*>(rows_max.view().data),
                               static_cast<float*>(rows_log_sum.view().data)};
  cuda::flash_forward(p, strided(out.view()), nullptr, rows);
  cuda::flash_backward(p, strided(out.view()), rows, strided(ddout.view()), strided(gq.view()),
                       strided(gk.view()), strided(gv.view()));
  cuda::synchronize(nullptr);
  AttentionGrads g;
  g.dq = gq.to_host().reshape(q.shape());
  g.dk = gk.to_host().reshape(k.shape());
  g.dv = gv.to_host().reshape(v.shape());
  // ∂loss/∂scale = Σ_ij dS_ij·s_ij, and dq_i = scale·Σ_j dS_ij·k_j, so Σ_i ⟨dq_i, q_i⟩ =
  // scale·∂loss/∂scale: read off the gradient, in float64. At scale 0 that identity is silent;
  // the float64 reference gives it there.
  if (p.scale != 0) {
    const Tensor gq64 = g.dq.to(DType::f64), q64 = q.to(DType::f64);
    double sum = 0;
    for (int64_t i = 0; i < q64.numel(); ++i) sum += gq64.data<double>()[i] * q64.data<double>()[i];
    g.dscale = sum / p.scale;
  } else {
    AttentionOptions reference = o;
    reference.path = Path::reference;
    g.dscale = attention_backward(dout, q, k, v, reference).dscale;
  }
  return g;
}

}  // namespace attention_detail

using attention_detail::check_device;
using attention_detail::check_output;

void attention(const DeviceAttention& a, const AttentionOptions& o) {
  using namespace attention_detail;
  const Dims d = check_device(a.q, a.k, a.v, a.mask, o);
  check_output("out", a.out, result_shape(d, true, d.Dv), a.q.dtype);
  if (a.logsumexp.defined())
    check_output("logsumexp", a.logsumexp, result_shape(d, false, 0), DeviceDType::f32);
  need_gpu();
  for (const auto& [name, t] :
       {std::pair{"q", &a.q}, std::pair{"k", &a.k}, std::pair{"v", &a.v},
        std::pair{"mask", &a.mask}, std::pair{"out", &a.out}, std::pair{"logsumexp", &a.logsumexp}})
    if (t->defined()) check_device_memory(name, *t);
  Uploads up;
  const cuda::Problem p = problem_of(a.q, a.k, a.v, a.mask, o, d, a.stream, up);
  cuda::flash_forward(p, strided(a.out), static_cast<float*>(a.logsumexp.data));
  // What was uploaded for this call is freed when it returns: wait for the kernels that read it.
  if (up.key_lengths.data() || up.mask.data()) cuda::synchronize(a.stream);
}

void attention_backward(const DeviceAttentionBackward& a, const AttentionOptions& o) {
  using namespace attention_detail;
  const Dims d = check_device(a.q, a.k, a.v, a.mask, o);
  const Shape outs = result_shape(d, true, d.Dv), rows = result_shape(d, false, 0);
  for (const auto& [name, t] : {std::pair{"dout", &a.dout}, std::pair{"out", &a.out}})
    if (!t->defined() || t->shape != outs || t->dtype != a.q.dtype || !contiguous(*t))
      fail(std::string(name) + " is " +
           (t->defined() ? std::string(to_string(t->dtype)) + " " + shape_str(t->shape)
                         : std::string("missing")) +
           "; expected contiguous " + std::string(to_string(a.q.dtype)) + " " + shape_str(outs));
  check_output("logsumexp", a.logsumexp, rows, DeviceDType::f32);
  check_output("dq", a.dq, a.q.shape, a.q.dtype);
  check_output("dk", a.dk, a.k.shape, a.k.dtype);
  check_output("dv", a.dv, a.v.shape, a.v.dtype);
  need_gpu();
  for (const auto& [name, t] :
       {std::pair{"dout", &a.dout}, std::pair{"q", &a.q}, std::pair{"k", &a.k},
        std::pair{"v", &a.v}, std::pair{"mask", &a.mask}, std::pair{"out", &a.out},
        std::pair{"logsumexp", &a.logsumexp}, std::pair{"dq", &a.dq}, std::pair{"dk", &a.dk},
        std::pair{"dv", &a.dv}})
    if (t->defined()) check_device_memory(name, *t);
  Uploads up;
  const cuda::Problem p = problem_of(a.q, a.k, a.v, a.mask, o, d, a.stream, up);
  // The caller's logsumexp stands for the rows (FlashAttention's own backward input). A float32
  // lse of logits in the hundreds carries |lse|·2⁻²⁴ into every P of its row; host tensors on
  // Path::cuda keep the forward's exact rows instead.
  const int64_t n = d.B * d.Hq * d.L;
  cuda::DeviceBuffer max(static_cast<std::size_t>(n) * 4), log_sum(static_cast<std::size_t>(n) * 4);
  const cuda::SoftmaxRows softmax{static_cast<float*>(max.data()),
                                  static_cast<float*>(log_sum.data())};
  cuda::rows_from_logsumexp(static_cast<const float*>(a.logsumexp.data), n, softmax, a.stream);
  cuda::flash_backward(p, strided(a.out), softmax, strided(a.dout), strided(a.dq), strided(a.dk),
                       strided(a.dv));
  // The rows (and what was uploaded) are freed when this returns: wait for the kernels first.
  cuda::synchronize(a.stream);
}

}  // namespace qkv
