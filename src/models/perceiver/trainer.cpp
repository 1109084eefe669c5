// Training the Perceiver on its task: AdamW with warmup and cosine decay, clipped gradients,
// periodic held-out accuracy with early stopping, then the final test.
#include <chrono>
#include <cmath>

#include "qkv/perceiver.h"

namespace qkv {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<PerceiverExample> examples(const PerceiverTask& task, int64_t n, nn::Rng rng) {
  std::vector<PerceiverExample> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(task.generate(rng));
  return out;
}

}  // namespace

// Fixed seeds apart from any training seed's stream (seed ^ golden-ratio multiples), so the
// held-out sets are the same for every run; with 10^1,400 possible inputs none repeats.
std::vector<PerceiverExample> perceiver_validation_set(const PerceiverTask& task, int64_t n) {
  return examples(task, n, nn::Rng(0x9E7CE1FE0001ull));
}
std::vector<PerceiverExample> perceiver_test_set(const PerceiverTask& task, int64_t n) {
  return examples(task, n, nn::Rng(0x9E7CE1FE0002ull));
}

double perceiver_accuracy(Perceiver& model, const PerceiverTask& task,
                          const std::vector<PerceiverExample>& set, int64_t batch_size) {
  if (set.empty()) return 0;
  int64_t correct = 0;
  for (std::size_t first = 0; first < set.size(); first += static_cast<std::size_t>(batch_size)) {
    const std::size_t last = std::min(set.size(), first + static_cast<std::size_t>(batch_size));
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> labels;
    for (std::size_t i = first; i < last; ++i) {
      ids.push_back(task.encode(set[i].input));
      labels.push_back(set[i].label);
    }
    correct += nn::cross_entropy(model.forward(ids), labels).correct;
  }
  return static_cast<double>(correct) / static_cast<double>(set.size());
}

PerceiverTrainSummary train_perceiver(
    Perceiver& model, const PerceiverTask& task, const PerceiverTrainOptions& o,
    const std::function<void(const PerceiverProgress&)>& progress) {
  if (o.steps < 1 || o.batch_size < 1 || o.eval_every < 1 || o.eval_examples < 1 ||
      o.test_examples < 0)
    throw Error("train_perceiver: steps, batch size, eval_every and eval_examples must be ≥ 1");
  if (model.config().length != task.length || model.config().classes != task.classes ||
      model.config().vocab != static_cast<int64_t>(task.alphabet.size()))
    throw Error("train_perceiver: the model reads " + std::to_string(model.config().length) +
                " symbols into " + std::to_string(model.config().classes) +
                " classes but the task has " + std::to_string(task.length) + " and " +
                std::to_string(task.classes));
  const auto t0 = Clock::now();
  PerceiverTrainSummary s;
  s.task = task.name;
  s.chance = 1.0 / static_cast<double>(task.classes);
  s.parameters = model.parameter_count();
  nn::AdamW optimizer(model.parameters(),
                      {.lr = o.lr,
                       .warmup_steps = std::min<int64_t>(100, std::max<int64_t>(1, o.steps / 10)),
                       .decay_steps = o.steps,
                       .clip_norm = 1.0});
  const std::vector<PerceiverExample> validation = perceiver_validation_set(task, o.eval_examples);
  nn::Rng data(o.seed ^ 0xDA7A5EEDull);
  double train_seconds = 0, interval_loss = 0;
  int64_t interval_steps = 0;
  std::optional<double> latest;
  for (int64_t step = 1; step <= o.steps; ++step) {
    const auto ts = Clock::now();
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < o.batch_size; ++i) {
      const PerceiverExample e = task.generate(data);
      ids.push_back(task.encode(e.input));
      labels.push_back(e.label);
    }
    model.zero_grad();
    const nn::CrossEntropy ce = nn::cross_entropy(model.forward(ids), labels);
    if (!std::isfinite(ce.loss))
      throw Error("training diverged at step " + std::to_string(step) + " (loss " +
                      std::to_string(ce.loss) + "); try a smaller --lr",
                  Error::Kind::runtime);
    model.backward(ce.dlogits);
    optimizer.step();
    train_seconds += since(ts);
    interval_loss += ce.loss;
    ++interval_steps;
    s.steps = step;

    PerceiverProgress p{.step = step,
                        .steps = o.steps,
                        .loss = ce.loss,
                        .accuracy = static_cast<double>(ce.correct) / static_cast<double>(ce.count),
                        .eval_accuracy = latest,
                        .seconds = since(t0)};
    if (step % o.eval_every == 0 || step == o.steps) {
      const double acc = perceiver_accuracy(model, task, validation);
      latest = p.eval_accuracy = acc;
      p.evaluated = true;
      s.final_loss = interval_loss / static_cast<double>(interval_steps);
      s.history.push_back({step, acc, s.final_loss, since(t0)});
      interval_loss = 0;
      interval_steps = 0;
      const double se = std::sqrt(acc * (1 - acc) / static_cast<double>(validation.size()));
      if (acc - 2 * se >= o.target_accuracy) s.stopped_early = step < o.steps;
    }
    if (progress) progress(p);
    if (s.stopped_early) break;
  }
  s.train_seconds = train_seconds;
  if (o.test_examples > 0) {
    s.test_examples = o.test_examples;
    s.test_accuracy = perceiver_accuracy(model, task, perceiver_test_set(task, o.test_examples));
  }
  s.wall_seconds = since(t0);
  return s;
}

}  // namespace qkv
