// qkv::attention and qkv::attention_backward for Python. The arguments arrive checked and
// normalized by python/qkv/_attention.py (PyTorch's conventions: is_causal, enable_gqa, ...);
// here they become AttentionOptions, and the kernels run without the GIL.
#include "qkv/attention.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

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
        c.options.path = parse(parse_path(path), "path", path, "auto, reference, fused");
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
}

}  // namespace qkv::python
