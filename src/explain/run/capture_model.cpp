// explain::capture(Model): the one door every model's run goes through — the registry's model
// handed to its family's capture, the run's header filled from the registry's ModelInfo.
#include <charconv>

#include "qkv/explain.h"
#include "qkv/train.h"

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
      run = capture(model.causal_lm(), input.text, keeps_rows(model, input));
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

Input default_input(const Model& model) {
  switch (model.kind()) {
    case ModelKind::seq2seq: {
      const Seq2SeqConfig& c = model.seq2seq().config();
      return {.text = test_set(make_task(c.task, c.task_options), 1).front().source};
    }
    case ModelKind::perceiver: {
      const PerceiverConfig& c = model.perceiver().config();
      return {.text = perceiver_test_set(make_perceiver_task(c.task, c.length), 1).front().input};
    }
    default:
      return {.text = kDefaultSentence};
  }
}

void check_source(const Seq2Seq& model, const std::string& source) {
  try {
    model.vocab().encode(source);
  } catch (const Error& e) {
    throw Error("\"" + clip(source, 40) + "\": " + e.what());
  }
  if (static_cast<int64_t>(source.size()) > model.config().max_source)
    throw Error("has " + std::to_string(source.size()) + " characters; the model reads at most " +
                std::to_string(model.config().max_source));
}

RunCost run_cost(const Model& model, const Input& input, bool json, bool html) {
  const std::string path = model.info().path;
  switch (model.kind()) {
    case ModelKind::sentence_encoder:
    case ModelKind::causal_lm: {
      int64_t tokens = 0, bytes = 0;
      if (model.kind() == ModelKind::causal_lm) {
        tokens = static_cast<int64_t>(model.causal_lm().tokenize(input.text).size());
        if (keeps_rows(model, input))
          return {run_rows_bytes(model.causal_lm(), tokens),
                  "explaining " + grouped(tokens) +
                      " tokens (each layer's q, k, v and row softmax kept; the weights shown "
                      "recomputed from them)"};
        bytes = run_bytes(model.causal_lm(), tokens, json);
      } else {
        const SentenceModel& m = model.sentence_model();
        tokens = static_cast<int64_t>(
            (input.text_b ? m.tokenize_pair(input.text, *input.text_b) : m.tokenize(input.text))
                .tokens.size());
        bytes = run_bytes(m, tokens, json);
      }
      return {bytes, "explaining " + grouped(tokens) + (tokens == 1 ? " token" : " tokens") +
                         " (every layer's scores, logits and weights kept" +
                         (json ? ", and written as JSON" : "") + ")"};
    }
    case ModelKind::seq2seq:
      return {seq2seq_capture_bytes(model.seq2seq().config()),
              "explaining " + path + " (every attention layer's weights kept)"};
    case ModelKind::perceiver:
      return {run_bytes(model.perceiver().config(), html),
              "explaining " + path + " (every latent's weight on every position kept)"};
  }
  return {};
}

}  // namespace qkv::explain
