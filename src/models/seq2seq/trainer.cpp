// The training loop of `qkv train`, its evaluation and the final greedy-decoding test.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "qkv/train.h"

namespace qkv {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "0.001", "1e-05", "nan": a double as the user would type it.
std::string number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

// Independent streams of one seed (SplitMix64 of distinct starting points).
nn::Rng stream(uint64_t seed, uint64_t which) {
  nn::Rng r(seed ^ (0x9E3779B97F4A7C15ull * (which + 1)));
  return r.split();
}

// True when an accuracy measured on n examples is at `target` beyond reasonable doubt: its
// lower 2-standard-error bound (a 95% interval's lower end) reaches it. Stopping the
// moment a measurement touches the target would stop at a true accuracy just below it about half
// the time; on 1,000 examples at 99.5% the bound is 99.05%.
bool confidently_at(double accuracy, int64_t n, double target) {
  const double se = std::sqrt(std::max(accuracy * (1 - accuracy), 0.0) / static_cast<double>(n));
  return accuracy - 2 * se >= target;
}

}  // namespace

std::unique_ptr<Seq2Seq> make_model(const Seq2SeqConfig& config, uint64_t seed, DType dtype) {
  nn::Rng rng = stream(seed, 0);
  return make_seq2seq(config, rng, dtype);
}

std::vector<Example> validation_set(const Task& task, int64_t n) {
  nn::Rng rng(0x5EED0001);
  return task.batch(rng, Split::test, n);
}

std::vector<Example> test_set(const Task& task, int64_t n) {
  nn::Rng rng(0x5EED0002);
  return task.batch(rng, Split::test, n);
}

double teacher_forced_accuracy(Seq2Seq& model, const std::vector<Example>& examples,
                               int64_t batch_size) {
  if (examples.empty()) return 0.0;
  nn::Rng rng(0);
  int64_t right = 0;
  for (std::size_t first = 0; first < examples.size();
       first += static_cast<std::size_t>(batch_size)) {
    const std::size_t last =
        std::min(examples.size(), first + static_cast<std::size_t>(batch_size));
    const std::vector<Example> chunk(examples.begin() + static_cast<std::ptrdiff_t>(first),
                                     examples.begin() + static_cast<std::ptrdiff_t>(last));
    const Batch batch = make_batch(model.vocab(), chunk);
    const Tensor logits = model.forward(batch, false, rng).to(DType::f64);
    const int64_t t = batch.target_length, v = logits.dim(2);
    for (int64_t i = 0; i < batch.size; ++i) {
      bool all = true;
      for (int64_t j = 0; j < batch.target_lengths[static_cast<std::size_t>(i)] && all; ++j) {
        const double* row = logits.data<double>() + (i * t + j) * v;
        const int32_t id = static_cast<int32_t>(std::max_element(row, row + v) - row);
        all = id == batch.target_out[static_cast<std::size_t>(i * t + j)];
      }
      right += all;
    }
  }
  return static_cast<double>(right) / static_cast<double>(examples.size());
}

double greedy_accuracy(Seq2Seq& model, const std::vector<Example>& examples,
                       std::vector<std::string>* outputs) {
  std::vector<std::string> sources;
  for (const Example& e : examples) sources.push_back(e.source);
  Seq2Seq::Decoded d = model.greedy_decode(sources);
  const double accuracy = exact_accuracy(d.outputs, examples);
  if (outputs) *outputs = std::move(d.outputs);
  return accuracy;
}

TrainSummary train(Seq2Seq& model, const Task& task, const TrainOptions& o,
                   const ProgressFn& progress) {
  if (o.steps < 1 || o.steps > 100'000'000)
    throw Error("--steps " + std::to_string(o.steps) + " is out of range; expected 1 to 10^8");
  if (o.batch_size < 1 || o.batch_size > 65536)
    throw Error("--batch " + std::to_string(o.batch_size) +
                " is out of range; expected 1 to 65536");
  if (!(o.lr > 0 && o.lr < 10))
    throw Error("--lr " + number(o.lr) + " is out of range; expected 0 < lr < 10");
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    throw Error("label smoothing " + number(o.label_smoothing) +
                " is out of range; expected [0, 1)");
  if (o.eval_examples < 1 || o.test_examples < 0) throw Error("evaluation sizes must be positive");
  if (model.config().task != task.name())
    throw Error("the model was made for task " + model.config().task + ", not " + task.name());

  const double start = now_seconds();
  TrainSummary s;
  s.task = task.name();
  s.parameters = model.parameter_count();
  const int64_t eval_every =
      o.eval_every > 0 ? o.eval_every : std::min<int64_t>(100, std::max<int64_t>(10, o.steps / 10));
  const std::vector<Example> validation = validation_set(task, o.eval_examples);

  std::vector<nn::Parameter*> params = model.parameters();
  nn::AdamW optimizer(
      params, {.lr = o.lr,
               .weight_decay = o.weight_decay,
               .warmup_steps = o.warmup >= 0 ? o.warmup : std::min<int64_t>(200, o.steps / 10),
               .decay_steps = o.steps,
               .min_lr_ratio = 0.1,
               .clip_norm = o.clip_norm});
  nn::Rng data = stream(o.seed, 1), dropout = stream(o.seed, 2);
  model.zero_grad();

  TrainProgress p;
  p.steps = o.steps;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    const double t0 = now_seconds();
    const Batch batch = make_batch(model.vocab(), task.batch(data, Split::train, o.batch_size));
    const Tensor logits = model.forward(batch, true, dropout);
    const int64_t v = logits.dim(2);
    const nn::CrossEntropy ce = nn::cross_entropy(
        logits.reshape({batch.size * batch.target_length, v}), batch.target_out, o.label_smoothing);
    if (!std::isfinite(ce.loss))
      throw Error("training diverged at step " + std::to_string(step) + " (loss " +
                      number(ce.loss) + "); try a smaller --lr",
                  Error::Kind::runtime);
    model.backward(ce.dlogits.reshape(logits.shape()));
    optimizer.step();
    model.zero_grad();
    s.train_seconds += now_seconds() - t0;
    s.tokens += batch.source_tokens + batch.target_tokens;
    s.steps = step;
    interval_loss += ce.loss;
    ++interval_steps;

    p.step = step;
    p.loss = ce.loss;
    p.token_accuracy = ce.count > 0 ? static_cast<double>(ce.correct) / ce.count : 0.0;
    p.evaluated = false;
    if (step % eval_every == 0 || step == o.steps) {
      const double accuracy = teacher_forced_accuracy(model, validation);
      p.eval_accuracy = accuracy;
      p.evaluated = true;
      s.final_loss = interval_loss / static_cast<double>(interval_steps);
      s.history.push_back({step, accuracy, s.final_loss, now_seconds() - start});
      interval_loss = 0;
      interval_steps = 0;
    }
    p.seconds = now_seconds() - start;
    if (progress) progress(p);
    if (p.evaluated && !s.reached_target && *p.eval_accuracy >= o.target_accuracy)
      s.reached_target = step;
    if (p.evaluated && confidently_at(*p.eval_accuracy, o.eval_examples, o.target_accuracy)) {
      s.stopped_early = true;
      break;
    }
  }
  if (interval_steps > 0) s.final_loss = interval_loss / static_cast<double>(interval_steps);

  if (o.test_examples > 0) {
    const std::vector<Example> test = test_set(task, o.test_examples);
    std::vector<std::string> outputs;
    s.test_accuracy = greedy_accuracy(model, test, &outputs);
    s.test_examples = o.test_examples;
    for (std::size_t i = 0; i < test.size() && s.mistakes.size() < 3; ++i)
      if (outputs[i] != test[i].target) s.mistakes.emplace_back(test[i], outputs[i]);
  }
  s.wall_seconds = now_seconds() - start;
  s.tokens_per_second = s.train_seconds > 0 ? static_cast<double>(s.tokens) / s.train_seconds : 0;
  return s;
}

}  // namespace qkv
