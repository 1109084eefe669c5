// What a finished training run shows: qkv train's summary, as text and as JSON (qkv/train.h).
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qkv/json.h"
#include "qkv/terminal.h"
#include "qkv/train.h"

namespace qkv {
namespace {

std::string percent(double x, int digits = 1) { return fixed(100 * x, digits) + "%"; }

}  // namespace

std::string summary_json(const TrainSummary& s, const TrainOptions& o, const Trainable& model,
                         int threads, const std::string& out) {
  nlohmann::json history = nlohmann::json::array(), sizes = nlohmann::json::object();
  for (const EvalPoint& e : s.history)
    history.push_back({{"step", e.step},
                       {"accuracy", number_json(e.accuracy)},
                       {"loss", number_json(e.loss)},
                       {"seconds", number_json(e.seconds)}});
  for (const auto& [name, value] : model.sizes()) sizes[name] = value;
  sizes["parameters"] = s.parameters;
  nlohmann::json j = {{"task", s.task}};
  if (model.architecture() == "perceiver")
    j["model"] = "perceiver", j["config"] = sizes;
  else
    j["model"] = nlohmann::json{{"architecture", model.architecture()}}, j["model"].update(sizes);
  j["training"] = {{"steps", s.steps},
                   {"max_steps", o.steps},
                   {"batch", o.batch_size},
                   {"lr", number_json(o.lr)},
                   {"seed", o.seed},
                   {"threads", threads},
                   {"target", number_json(o.target_accuracy)},
                   {"reached_target_step",
                    s.reached_target ? nlohmann::json(*s.reached_target) : nlohmann::json()},
                   {"stopped_early", s.stopped_early},
                   {"final_loss", number_json(s.final_loss)}};
  j["test_accuracy"] = number_json(s.test_accuracy);
  j["test_examples"] = s.test_examples;
  if (s.chance) j["chance"] = number_json(*s.chance);
  j["wall_seconds"] = number_json(s.wall_seconds);
  j["train_seconds"] = number_json(s.train_seconds);
  j["tokens"] = s.tokens;
  j["tokens_per_second"] = number_json(s.tokens_per_second);
  j["history"] = history;
  j["out"] = out.empty() ? nlohmann::json() : nlohmann::json(path_json(out));
  return j.dump();
}

std::string summary_text(const TrainSummary& s, const TrainOptions& o, Trainable& model,
                         int threads, const std::string& out) {
  std::ostringstream text;
  text << wrap("qkv train " + s.task + ": " + model.task_description(), 80, 2) << "\n\n"
       << "  model      " << model.description() << "\n  training   " << grouped(s.steps)
       << " steps × " << o.batch_size << " examples";
  const std::string target = percent(o.target_accuracy, 0);
  if (s.stopped_early)
    text << ", stopped early: held-out ≥ " << target << " beyond doubt\n"
         << "             (accuracy − 2 standard errors; first ≥ " << target << " at step "
         << grouped(*s.reached_target) << ")";
  else if (o.target_accuracy <= 1)
    text << (s.reached_target ? "; reached " + target + " at step " + grouped(*s.reached_target) +
                                    ", not yet beyond doubt"
                              : "; did not reach " + target + " held-out (more --steps?)");
  text << "\n  loss       " << fixed(s.final_loss, 3) << " (cross-entropy"
       << (o.label_smoothing > 0 ? ", label smoothing " + fixed(o.label_smoothing, 1) : "")
       << (s.chance ? "; chance " + fixed(std::log(1 / *s.chance), 3) : "") << ")\n";
  if (s.test_examples > 0)
    text << "  held-out   " << percent(s.test_accuracy)
         << (s.chance ? " accuracy on " + grouped(s.test_examples) + " test examples (chance " +
                            percent(*s.chance) + ")\n"
                      : " exact-sequence accuracy (" + grouped(s.test_examples) +
                            " test examples, greedy decoding)\n");
  text << "  time       " << fixed(s.wall_seconds, 1) << " s wall (" << fixed(s.train_seconds, 1)
       << " s in training steps), " << grouped(std::llround(s.tokens_per_second)) << " tokens/s, "
       << threads << (threads == 1 ? " thread\n" : " threads\n");
  if (!s.mistakes.empty()) text << "\n  wrong on, e.g.:\n";
  for (const auto& [e, got] : s.mistakes)
    text << "    " << pad_right("\"" + e.source + "\"", 30) << " → \"" << got << "\" (expected \""
         << e.target << "\")\n";
  if (out.empty()) return text.str();
  const std::optional<std::string> input = model.sample_input();
  text << "\nwrote " << printable(out) << "; see its attention with\n  qkv explain --model "
       << printable(out) << (input ? " --input \"" + *input + "\"" : "") << "\n";
  return text.str();
}

}  // namespace qkv
