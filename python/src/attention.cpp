// qkv::attention and qkv::attention_backward for Python. The arguments arrive checked and
// normalized by python/qkv/_attention.py (PyTorch's conventions: is_causal, enable_gqa, ...);
// here they become AttentionOptions, and the kernels run without the GIL. CUDA arrays (found by
// python/qkv/_device.py) arrive as device views and run on the GPU (device_attention below).
#include "qkv/attention.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>

#include "arrays.h"
#include "bindings.h"

namespace qkv::python {
namespace {

template <class T>
T parse(std::optional<T> parsed, const std::string& what, const std::string& value,
        const std::string& expected) {
  if (!parsed) throw Error(what + " '" + value + "'; expected one of " + expected);
  return *parsed;
}

// "scaled_dot" or "scaled-dot": Python spells names with underscores, the command with hyphens.
std::string hyphens(std::string name) {
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// "scaled_dot, dot, ...": every score, from all_scores(), spelled as Python spells it.
std::string score_names() {
  std::string names;
  for (const Score s : all_scores()) {
    std::string name(to_string(s));
    for (char& c : name)
      if (c == '-') c = '_';
    names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

struct Call {
  Tensor q, k, v;
  AttentionOptions options;
};

Call make_call(const Array& q, const Array& k, const Array& v, const std::optional<Array>& mask,
               const std::string& causal, std::optional<double> scale, const std::string& score,
               const std::string& normalize, const nb::dict& params, const std::string& precision) {
  Call c{tensor_of(q, "query"), tensor_of(k, "key"), tensor_of(v, "value"), {}};
  AttentionOptions& o = c.options;
  o.precision = parse(parse_precision(precision), "precision", precision, "fp32, bf16");
  o.score = parse(parse_score(hyphens(score)), "score", score, score_names());
  o.causal =
      parse(parse_causal(hyphens(causal)), "causal_alignment", causal, "top_left, bottom_right");
  o.normalize = parse(parse_normalize(hyphens(normalize)), "normalize", normalize, "softmax, none");
  o.scale = scale;
  if (mask) o.mask = tensor_of(*mask, "attn_mask");
  for (auto [key, value] : params) {
    const std::string name = nb::cast<std::string>(key);
    Tensor* field = name == "w"     ? &o.params.w
                    : name == "w_q" ? &o.params.w_q
                    : name == "w_k" ? &o.params.w_k
                    : name == "v"   ? &o.params.v
                                    : nullptr;
    if (field == nullptr)
      throw Error("params: '" + name + "'; expected w (general) or w_q, w_k, v (additive)");
    *field = tensor_of(nb::cast<Array>(value), "params['" + name + "']");
  }
  ArgumentNames names{.q = "query", .k = "key", .v = "value", .mask = "attn_mask"};
  names.w = "params['w']", names.w_q = "params['w_q']", names.w_k = "params['w_k']",
  names.v_param = "params['v']";
  check_attention(c.q, c.k, c.v, o, names);
  return c;
}

// Refuses a call whose estimate (qkv::attention_bytes) is over memory_limit, before it runs, as
// `qkv attend` refuses past --memory-limit: MemoryError naming both sizes, not std::bad_alloc
// halfway. `need` counts what the call allocates beyond its inputs, which the caller holds.
void check_call_memory(int64_t need, const Call& c, int64_t memory_limit, const char* call) {
  const Tensor& q = c.q;
  const int64_t keys = c.k.rank() >= 2 ? c.k.dim(-2) : 0;
  const bool weights = c.options.need_weights;
  check_memory_limit(need, memory_limit,
                     std::string(call) + " of a query " + std::string(dtype_name(q.dtype())) + " " +
                         shape_str(q.shape()) + " over " + grouped(keys) + " keys" +
                         (weights ? " with need_weights (every query's weight on every key)" : ""),
                     std::string(weights ? "need_weights=False (float32 scaled_dot or dot then "
                                           "runs fused, in memory linear in the lengths), "
                                         : "") +
                         "fewer queries or keys, or a higher memory_limit");
}

nb::dict params_of(const ScoreParams& p) {
  nb::dict d;
  if (p.w.defined()) d["w"] = array_of(p.w);
  if (p.w_q.defined()) d["w_q"] = array_of(p.w_q);
  if (p.w_k.defined()) d["w_k"] = array_of(p.w_k);
  if (p.v.defined()) d["v"] = array_of(p.v);
  return d;
}

// ---- on the GPU: device arrays (PyTorch's, CuPy's, ...) as qkv::DeviceTensor views ----
// python/qkv/_device.py finds each array's device pointer, dtype, shape and strides (in elements)
// and passes them as a tuple (pointer, dtype name, shape, strides); the outputs it allocated with
// the inputs' own library arrive the same way. Nothing is copied and nothing is owned here: the
// Python objects outlive the call, which waits for nothing (the work is queued on `stream`).
DeviceDType device_dtype_of(const std::string& name, const std::string& what) {
  if (name == "float32") return DeviceDType::f32;
  if (name == "bfloat16") return DeviceDType::bf16;
  if (name == "float16") return DeviceDType::f16;
  if (name == "bool") return DeviceDType::b8;
  throw Error(what + ": " + name +
              " device array; expected float32, bfloat16, float16 (a mask "
              "may be bool)");
}

DeviceTensor device_tensor_of(const std::optional<nb::tuple>& t, const std::string& what) {
  DeviceTensor d;
  if (!t) return d;
  if (t->size() != 4)
    throw Error(what + ": a device view of " + std::to_string(t->size()) +
                " items; expected (pointer, dtype, shape, strides)");
  d.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>((*t)[0]));
  d.dtype = device_dtype_of(nb::cast<std::string>((*t)[1]), what);
  d.shape = nb::cast<Shape>((*t)[2]);
  d.strides = nb::cast<Shape>((*t)[3]);
  if (d.shape.size() > static_cast<std::size_t>(kMaxRank))
    throw Error(what + ": " + std::to_string(d.shape.size()) + " dimensions; expected at most " +
                std::to_string(kMaxRank));
  if (!d.strides.empty() && d.strides.size() != d.shape.size())
    throw Error(what + ": " + std::to_string(d.strides.size()) + " strides for " +
                std::to_string(d.shape.size()) + " dimensions");
  return d;
}

AttentionOptions device_options(const std::string& causal, std::optional<double> scale,
                                const std::string& score, const std::string& normalize,
                                const std::string& precision) {
  AttentionOptions o;
  o.precision = parse(parse_precision(precision), "precision", precision, "fp32, bf16");
  o.score = parse(parse_score(hyphens(score)), "score", score, score_names());
  o.causal =
      parse(parse_causal(hyphens(causal)), "causal_alignment", causal, "top_left, bottom_right");
  o.normalize = parse(parse_normalize(hyphens(normalize)), "normalize", normalize, "softmax, none");
  o.scale = scale;
  o.path = Path::cuda;
  return o;
}

void* stream_of(std::uintptr_t stream) { return reinterpret_cast<void*>(stream); }

}  // namespace

void bind_attention(nb::module_& m) {
  // Opaque to Python: SavedForward carries it from qkv.attention to qkv.attention_backward.
  nb::class_<ForwardFingerprint>(
      m, "ForwardFingerprint",
      "qkv::ForwardFingerprint: what a forward was computed from (its inputs' dtypes, shapes and "
      "a hash of their values; its options), so that a backward refuses another's saved forward.")
      .def("__repr__", [](const ForwardFingerprint& f) {
        return "<qkv forward of a query " + std::string(dtype_name(f.query.dtype)) + " " +
               shape_str(f.query.shape) + ">";
      });

  m.def(
      "attention",
      [](const Array& q, const Array& k, const Array& v, const std::optional<Array>& mask,
         const std::string& causal, std::optional<double> scale, const std::string& score,
         const std::string& normalize, const nb::dict& params, bool need_weights,
         const std::string& path, bool keep_for_backward, const std::string& precision,
         int64_t memory_limit) {
        Call c = make_call(q, k, v, mask, causal, scale, score, normalize, params, precision);
        c.options.need_weights = need_weights;
        c.options.keep_for_backward = keep_for_backward;
        c.options.path = parse(parse_path(path), "path", path, "auto, reference, fused, cuda");
        check_call_memory(attention_bytes(c.q, c.k, c.v, c.options), c, memory_limit, "attention");
        AttentionResult r;
        {
          nb::gil_scoped_release release;
          r = attention(c.q, c.k, c.v, c.options);
        }
        return nb::make_tuple(array_of(r.out), array_of(r.weights), array_of(r.saved_max),
                              array_of(r.saved_sum),
                              r.fingerprint.recorded ? nb::cast(r.fingerprint) : nb::none());
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask").none(), nb::arg("causal"),
      nb::arg("scale").none(), nb::arg("score"), nb::arg("normalize"), nb::arg("params"),
      nb::arg("need_weights"), nb::arg("path"), nb::arg("keep_for_backward"), nb::arg("precision"),
      nb::arg("memory_limit"),
      "qkv::attention: (out, weights or None, saved_max or None, saved_sum or None, fingerprint or "
      "None), refused past memory_limit (bytes beyond the inputs; 0: half the machine's memory). "
      "Called by qkv.attention.");

  m.def(
      "attention_backward",
      [](const Array& dout, const Array& q, const Array& k, const Array& v,
         const std::optional<Array>& mask, const std::string& causal, std::optional<double> scale,
         const std::string& score, const std::string& normalize, const nb::dict& params,
         const std::optional<Array>& out, const std::optional<Array>& saved_max,
         const std::optional<Array>& saved_sum, const ForwardFingerprint* fingerprint,
         const std::string& precision, int64_t memory_limit) {
        Call c = make_call(q, k, v, mask, causal, scale, score, normalize, params, precision);
        const Tensor d = tensor_of(dout, "grad_out");
        check_call_memory(attention_backward_bytes(c.q, c.k, c.v, c.options), c, memory_limit,
                          "attention_backward");
        AttentionResult forward;  // qkv.attention(..., keep_for_backward=True)'s, if given
        if (out) forward.out = tensor_of(*out, "saved.out");
        if (saved_max) forward.saved_max = tensor_of(*saved_max, "saved.max");
        if (saved_sum) forward.saved_sum = tensor_of(*saved_sum, "saved.sum");
        if (fingerprint != nullptr) forward.fingerprint = *fingerprint;
        AttentionGrads g;
        {
          nb::gil_scoped_release release;
          g = attention_backward(d, c.q, c.k, c.v, forward, c.options);
        }
        return nb::make_tuple(array_of(g.dq), array_of(g.dk), array_of(g.dv), params_of(g.dparams),
                              g.dscale);
      },
      nb::arg("dout"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask").none(),
      nb::arg("causal"), nb::arg("scale").none(), nb::arg("score"), nb::arg("normalize"),
      nb::arg("params"), nb::arg("out").none(), nb::arg("saved_max").none(),
      nb::arg("saved_sum").none(), nb::arg("fingerprint").none(), nb::arg("precision"),
      nb::arg("memory_limit"),
      "qkv::attention_backward: (dq, dk, dv, dparams, dscale), refused past memory_limit. Called "
      "by qkv.attention_backward.");

  // What qkv::attention receives for an array: its address, shape and strides, so that the
  // tests can see that no copy was made.
  m.def(
      "_view_of",
      [](const Array& a) {
        const Tensor t = tensor_of(a, "array");
        const void* data = t.dtype() == DType::f32   ? static_cast<const void*>(t.data<float>())
                           : t.dtype() == DType::f64 ? static_cast<const void*>(t.data<double>())
                                                     : static_cast<const void*>(t.data<bool>());
        return nb::make_tuple(reinterpret_cast<std::uintptr_t>(data), nb::cast(t.shape()),
                              nb::cast(t.strides()));
      },
      nb::arg("a"));
  // ---- on the GPU ----
  m.def(
      "cuda_device",
      [] {
        const CudaDevice d = cuda_device();
        return nb::make_tuple(d.built, d.present, d.description);
      },
      "qkv::cuda_device(): (built with CUDA, a GPU present, its description or why not).");

  m.def(
      "device_attention",
      [](const nb::tuple& q, const nb::tuple& k, const nb::tuple& v,
         const std::optional<nb::tuple>& mask, const nb::tuple& out,
         const std::optional<nb::tuple>& logsumexp, const std::string& causal,
         std::optional<double> scale, const std::string& score, const std::string& normalize,
         const std::string& precision, std::uintptr_t stream) {
        DeviceAttention a;
        a.q = device_tensor_of(q, "query");
        a.k = device_tensor_of(k, "key");
        a.v = device_tensor_of(v, "value");
        a.mask = device_tensor_of(mask, "attn_mask");
        a.out = device_tensor_of(out, "out");
        a.logsumexp = device_tensor_of(logsumexp, "logsumexp");
        a.stream = stream_of(stream);
        const AttentionOptions o = device_options(causal, scale, score, normalize, precision);
        nb::gil_scoped_release release;
        attention(a, o);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask").none(), nb::arg("out"),
      nb::arg("logsumexp").none(), nb::arg("causal"), nb::arg("scale").none(), nb::arg("score"),
      nb::arg("normalize"), nb::arg("precision"), nb::arg("stream"),
      "qkv::attention(DeviceAttention) on device views (pointer, dtype, shape, strides in "
      "elements), queued on `stream` (a cudaStream_t as an int; 0: the default stream). Writes "
      "out (and logsumexp). Called by qkv.attention for CUDA arrays.");

  m.def(
      "device_attention_backward",
      [](const nb::tuple& dout, const nb::tuple& q, const nb::tuple& k, const nb::tuple& v,
         const std::optional<nb::tuple>& mask, const nb::tuple& out, const nb::tuple& logsumexp,
         const nb::tuple& dq, const nb::tuple& dk, const nb::tuple& dv, const std::string& causal,
         std::optional<double> scale, const std::string& score, const std::string& normalize,
         const std::string& precision, std::uintptr_t stream) {
        DeviceAttentionBackward a;
        a.dout = device_tensor_of(dout, "grad_out");
        a.q = device_tensor_of(q, "query");
        a.k = device_tensor_of(k, "key");
        a.v = device_tensor_of(v, "value");
        a.mask = device_tensor_of(mask, "attn_mask");
        a.out = device_tensor_of(out, "saved.out");
        a.logsumexp = device_tensor_of(logsumexp, "saved.logsumexp");
        a.dq = device_tensor_of(dq, "dq");
        a.dk = device_tensor_of(dk, "dk");
        a.dv = device_tensor_of(dv, "dv");
        a.stream = stream_of(stream);
        const AttentionOptions o = device_options(causal, scale, score, normalize, precision);
        nb::gil_scoped_release release;
        attention_backward(a, o);
      },
      nb::arg("dout"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask").none(),
      nb::arg("out"), nb::arg("logsumexp"), nb::arg("dq"), nb::arg("dk"), nb::arg("dv"),
      nb::arg("causal"), nb::arg("scale").none(), nb::arg("score"), nb::arg("normalize"),
      nb::arg("precision"), nb::arg("stream"),
      "qkv::attention_backward(DeviceAttentionBackward) on device views, given the forward's out "
      "and logsumexp; writes dq, dk, dv. Called by qkv.attention_backward for CUDA arrays.");

  // A DLPack producer's array (JAX's, say) as a device view, with its device: (pointer, dtype
  // name, shape, strides in elements, DLPack device type, device id). nanobind reads the
  // capsule; the pointer stays valid while the caller holds the array.
  m.def(
      "_dlpack_view",
      [](const nb::ndarray<nb::ro>& a) {
        const nb::dlpack::dtype t = a.dtype();
        std::string dtype;
        if (t == nb::dtype<float>())
          dtype = "float32";
        else if (t == nb::dtype<bool>())
          dtype = "bool";
        else if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && t.bits == 16 &&
                 t.lanes == 1)
          dtype = "bfloat16";
        else if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 16 &&
                 t.lanes == 1)
          dtype = "float16";
        else {
          const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
          dtype = std::string(t.code < 7 ? kinds[t.code] : "unknown") + std::to_string(t.bits);
        }
        Shape shape, strides;
        for (std::size_t i = 0; i < a.ndim(); ++i) {
          shape.push_back(static_cast<int64_t>(a.shape(i)));
          strides.push_back(a.stride(i));
        }
        return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), dtype, nb::cast(shape),
                              nb::cast(strides), a.device_type(), a.device_id());
      },
      nb::arg("a"));
}

}  // namespace qkv::python
