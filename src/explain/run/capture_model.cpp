// explain::capture(Model): the one door every model's run goes through — the registry's model
// handed to its family's capture, the run's header filled from the registry's ModelInfo.
#include <charconv>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

// The metadata numbers the views show, checked: qkv train writes them, anything may edit them.
void check_metadata(const Model& model) {
  for (const auto& [key, hi] : {std::pair{"qkv.steps", 1e8}, std::pair{"qkv.test_accuracy", 1.0}}) {
    const auto it = model.metadata().find(key);
    if (it == model.metadata().end()) continue;
    double x = 0;
    const char* begin = it->second.data();
    const auto [end, ec] = std::from_chars(begin, begin + it->second.size(), x);
    if (ec != std::errc() || end != begin + it->second.size() || !(x >= 0 && x <= hi))
      throw Error(model.info().path + ": the metadata's " + key + " is \"" + clip(it->second, 24) +
                      "\"; expected a number from 0 to " + short_number(hi),
                  Error::Kind::invalid_argument);
  }
}

}  // namespace

Run capture(const Model& model, const Input& input) {
  const ModelInfo& info = model.info();
  Run run;
  switch (model.kind()) {
    case ModelKind::sentence_encoder:
      run = input.text_b
                ? capture(model.sentence_model(), input.text, std::string_view(*input.text_b))
                : capture(model.sentence_model(), input.text);
      break;
    case ModelKind::causal_lm:
      run = capture(model.causal_lm(), input.text);
      break;
    case ModelKind::seq2seq:
      check_metadata(model);
      run = capture(model.seq2seq(), input.text, info.name, model.metadata());
      break;
    case ModelKind::perceiver: {
      const PerceiverConfig& c = model.perceiver().config();
      run =
          capture(model.perceiver(), make_perceiver_task(c.task, c.length), input.text, info.name);
      break;
    }
  }
  run.model.family = info.family;
  return run;
}

int64_t run_bytes(const Model& model, const Input& input, bool json, bool html) {
  switch (model.kind()) {
    case ModelKind::sentence_encoder: {
      const SentenceModel& m = model.sentence_model();
      const Encoding e =
          input.text_b ? m.tokenize_pair(input.text, *input.text_b) : m.tokenize(input.text);
      return run_bytes(m, static_cast<int64_t>(e.tokens.size()), json);
    }
    case ModelKind::causal_lm: {
      const CausalLM& m = model.causal_lm();
      return run_bytes(m, static_cast<int64_t>(m.tokenize(input.text).size()), json);
    }
    case ModelKind::seq2seq:
      return seq2seq_capture_bytes(model.seq2seq().config());
    case ModelKind::perceiver:
      return run_bytes(model.perceiver().config(), html);
  }
  return 0;
}

}  // namespace qkv::explain
