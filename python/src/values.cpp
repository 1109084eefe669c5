// What the values carried, for Python (issue 28): a captured run's value norms, value-weighted
// attention, mixing, rollouts and sinks (qkv/explain_readings.h) as NumPy arrays, None where the
// run has none of them; and generation explained (qkv/explain_generation.h) as the JSON document
// of `qkv generate --explain --json`. python/qkv/_values.py wraps both.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "qkv/explain.h"
#include "qkv/explain_generation.h"
#include "unlocked.h"

namespace qkv::python {
namespace {

bool has_norms(const explain::Run& e) {
  return !e.blocks.empty() && !e.blocks.front().ov_norms.empty();
}

void check_layer(const explain::Run& e, int64_t layer) {
  if (layer < 0 || layer >= e.model.layers)
    throw Error("layer " + std::to_string(layer) + " is out of range; this model has layers 0–" +
                std::to_string(e.model.layers - 1));
}

// Every layer's tensor as a list of arrays, or None where a reading was not computed.
nb::object arrays_of(const std::vector<Tensor>& ts) {
  nb::list out;
  for (const Tensor& t : ts) out.append(array_of(t));
  return std::move(out);
}

nb::object rollouts(const explain::Run& e) {
  std::vector<Tensor> rollout, mixing_rollout;
  if (has_norms(e) && e.size() <= explain::kMixingMaxTokens) {
    nb::gil_scoped_release release;
    rollout = explain::attention_rollout(e);
    if (explain::has_mixing(e)) mixing_rollout = explain::mixing_rollout(e);
  }
  nb::dict d;
  d["rollout"] = rollout.empty() ? nb::none() : arrays_of(rollout);
  d["mixing_rollout"] = mixing_rollout.empty() ? nb::none() : arrays_of(mixing_rollout);
  return std::move(d);
}

nb::list sinks(const explain::Run& e) {
  nb::list out;
  for (const explain::SinkValues& s : explain::sink_values(e)) {
    nb::dict d;
    d["layer"] = s.layer;
    d["head"] = s.head;
    d["weight"] = s.weight;
    d["first_norm"] = s.first_norm;
    d["others_norm"] = s.others_norm;
    d["value_share"] = s.value_share;
    d["moved"] = s.moved;
    out.append(d);
  }
  return out;
}

// explain::explain_generation of `prompt`, checked against memory_limit as `qkv generate
// --explain` checks it, run without the GIL (Ctrl-C heard between tokens); its JSON as text.
std::string generation(const CausalLM& lm, const std::vector<int32_t>& prompt, int64_t max_tokens,
                       double temperature, uint64_t seed, int64_t top_heads, int64_t top_keys,
                       int64_t memory_limit) {
  const int64_t positions = static_cast<int64_t>(prompt.size()) + max_tokens;
  check_memory_limit(std::max(lm.generate_bytes(positions),
                              lm.capture_bytes(std::min(positions, lm.context_length()))),
                     memory_limit,
                     "explaining " + grouped(max_tokens) + " generated tokens after a prompt of " +
                         grouped(static_cast<int64_t>(prompt.size())) +
                         " (the model, its KV cache and each step's capture)",
                     "a shorter prompt or max_tokens");
  const explain::GenerationRequest request{
      .generate = {.max_tokens = max_tokens, .temperature = temperature, .seed = seed},
      .top_heads = top_heads,
      .top_keys = top_keys};
  Unlocked unlocked;
  return unlocked.run([&] {
    const explain::ExplainedGeneration g = explain::explain_generation(
        lm, prompt, request,
        [&](const explain::ExplainedGeneration&, const explain::GenerationStep&) {
          unlocked.check_signals();
        });
    return explain::generation_json(g).dump();
  });
}

}  // namespace

void bind_values(nb::module_& m, nb::class_<explain::Run>& run) {
  run.def(
         "value_norms",
         [](const explain::Run& e, int64_t layer) {
           check_layer(e, layer);
           return has_norms(e) ? array_of(explain::unbatch(
                                     e.blocks.front().ov_norms[static_cast<std::size_t>(layer)]))
                               : nb::none();
         },
         nb::arg("layer"), "Block::ov_norms of one layer [heads, n] (float64), else None.")
      .def(
          "value_weighted",
          [](const explain::Run& e, int64_t layer) {
            check_layer(e, layer);
            return has_norms(e) ? array_of(explain::value_weighted(e, layer)) : nb::none();
          },
          nb::arg("layer"), "explain::value_weighted [heads, n, n] (float64), else None.")
      .def(
          "mixing",
          [](const explain::Run& e, int64_t layer) {
            check_layer(e, layer);
            return explain::has_mixing(e) ? array_of(explain::mixing(e, layer)) : nb::none();
          },
          nb::arg("layer"), "explain::mixing [n, n] (float64), else None.")
      .def("rollouts", &rollouts,
           "{rollout, mixing_rollout}: every layer's [n, n] (float64), each None where not "
           "computed (explain::attention_rollout, mixing_rollout).")
      .def("sinks", &sinks, "explain::sink_values as dicts.");
  m.def("explain_generation", &generation, nb::arg("lm"), nb::arg("prompt"), nb::arg("max_tokens"),
        nb::arg("temperature"), nb::arg("seed"), nb::arg("top_heads"), nb::arg("top_keys"),
        nb::arg("memory_limit"),
        "explain::explain_generation's JSON (explain::generation_json), as `qkv generate "
        "--explain --json` prints it.");
}

}  // namespace qkv::python
