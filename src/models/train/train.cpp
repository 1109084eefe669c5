// The one training loop of qkv/train.h, for every Trainable: options checked by field, AdamW, the
// held-out evaluations and their early stop, the final test; and saving what it trained.
#include "qkv/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "models/train/trainables.h"

namespace qkv {

namespace train_detail {

nn::Rng seed_stream(uint64_t seed, uint64_t which) {
  nn::Rng r(seed ^ (0x9E3779B97F4A7C15ull * (which + 1)));
  return r.split();
}

std::string number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

}  // namespace train_detail

namespace {

using train_detail::number;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// True when an accuracy measured on n examples is at `target` beyond reasonable doubt: its
// lower 2-standard-error bound (a 95% interval's lower end) reaches it. Stopping the
// moment a measurement touches the target would stop at a true accuracy just below it about half
// the time; on 1,000 examples at 99.5% the bound is 99.05%.
bool confidently_at(double accuracy, int64_t n, double target) {
  const double se = std::sqrt(std::max(accuracy * (1 - accuracy), 0.0) / static_cast<double>(n));
  return accuracy - 2 * se >= target;
}

void in_range(const char* field, int64_t value, int64_t lo, int64_t hi, const char* expected) {
  if (value < lo || value > hi)
    throw FieldError(field, "{" + std::string(field) + "} " + std::to_string(value) +
                                " is out of range; expected " + expected);
}

}  // namespace

void TrainOptions::validate() const {
  const TrainOptions& o = *this;
  in_range("steps", o.steps, 1, 100'000'000, "1 to 10^8");
  in_range("batch_size", o.batch_size, 1, 65536, "1 to 65536");
  if (!(o.lr > 0 && o.lr < 10))
    throw FieldError("lr", "{lr} " + number(o.lr) + " is out of range; expected 0 < lr < 10");
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    throw FieldError("label_smoothing", "{label_smoothing} " + number(o.label_smoothing) +
                                            " is out of range; expected [0, 1)");
  if (!(std::isfinite(o.target_accuracy) && o.target_accuracy >= 0 && o.target_accuracy <= 10))
    throw FieldError("target_accuracy", "{target_accuracy} " + number(o.target_accuracy) +
                                            " is out of range; expected 0 to 10 (> 1: never stop "
                                            "early)");
  in_range("eval_every", o.eval_every, 0, 100'000'000, "1 to 10^8 (0: the default)");
  in_range("eval_examples", o.eval_examples, 1, 1'000'000, "1 to 10^6");
  in_range("test_examples", o.test_examples, 0, 1'000'000, "0 to 10^6");
}

TrainSummary train(Trainable& model, const TrainOptions& o, const ProgressFn& progress) {
  o.validate();
  const double start = now_seconds();
  TrainSummary s;
  s.task = model.task();
  s.seed = o.seed;
  s.parameters = model.module().parameter_count();
  const int64_t eval_every =
      o.eval_every > 0 ? o.eval_every : std::min<int64_t>(100, std::max<int64_t>(10, o.steps / 10));

  std::vector<nn::Parameter*> params = model.module().parameters();
  nn::AdamW optimizer(
      params, {.lr = o.lr,
               .weight_decay = o.weight_decay,
               .warmup_steps = o.warmup >= 0 ? o.warmup : std::min<int64_t>(200, o.steps / 10),
               .decay_steps = o.steps,
               .min_lr_ratio = 0.1,
               .clip_norm = o.clip_norm});
  nn::Rng data = train_detail::seed_stream(o.seed, train_detail::kData);
  nn::Rng noise = train_detail::seed_stream(o.seed, train_detail::kNoise);
  model.module().zero_grad();

  TrainProgress p;
  p.steps = o.steps;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    const double t0 = now_seconds();
    const Trainable::Step b = model.step(data, noise, o);
    if (!std::isfinite(b.loss))
      throw FieldError("lr",
                       "training diverged at step " + std::to_string(step) + " (loss " +
                           number(b.loss) + "); try a smaller {lr}",
                       Error::Kind::runtime);
    optimizer.step();
    model.module().zero_grad();
    s.train_seconds += now_seconds() - t0;
    s.tokens += b.tokens;
    s.steps = step;
    interval_loss += b.loss;
    ++interval_steps;

    p.step = step;
    p.loss = b.loss;
    p.token_accuracy = b.count > 0 ? static_cast<double>(b.correct) / b.count : 0.0;
    p.evaluated = false;
    if (step % eval_every == 0 || step == o.steps) {
      const double accuracy = model.evaluate(o.eval_examples);
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
  s.test_examples = o.test_examples;
  model.test(o.test_examples, s);
  s.wall_seconds = now_seconds() - start;
  s.tokens_per_second = s.train_seconds > 0 ? static_cast<double>(s.tokens) / s.train_seconds : 0;
  return s;
}

TrainSummary train(Seq2Seq& model, const Task& task, const TrainOptions& options,
                   const ProgressFn& progress) {
  return train(*trainable(model, task), options, progress);
}

TrainSummary train(Perceiver& model, const PerceiverTask& task, const TrainOptions& options,
                   const ProgressFn& progress) {
  return train(*trainable(model, task), options, progress);
}

std::map<std::string, std::string> trained_metadata(const TrainSummary& s) {
  char accuracy[32];
  std::snprintf(accuracy, sizeof accuracy, "%.4f", s.test_accuracy);
  return {{"qkv.steps", std::to_string(s.steps)},
          {"qkv.seed", std::to_string(s.seed)},
          {"qkv.test_accuracy", accuracy}};
}

void save_trained(Trainable& model, const std::string& path, const TrainSummary& summary) {
  model.save(path, trained_metadata(summary));
}

}  // namespace qkv
