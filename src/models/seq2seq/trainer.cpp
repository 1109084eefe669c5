// The encoder–decoder models as a Trainable of the one training loop (models/train/train.cpp):
// a step on a batch of the task, the teacher-forced evaluation, the final greedy-decoding test.
#include <algorithm>
#include <cmath>

#include "models/train/trainables.h"
#include "qkv/train.h"

namespace qkv {

std::unique_ptr<Seq2Seq> make_model(const Seq2SeqConfig& config, uint64_t seed, DType dtype) {
  nn::Rng rng = train_detail::seed_stream(seed, train_detail::kInit);
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

namespace {

class Seq2SeqTrainable : public Trainable {
 public:
  Seq2SeqTrainable(Seq2Seq& model, Task task, std::unique_ptr<Seq2Seq> owned = nullptr)
      : owned_(std::move(owned)), model_(model), task_(std::move(task)) {
    if (model_.config().task != task_.name())
      throw FieldError(
          "task", "the model was made for task " + model_.config().task + ", not " + task_.name());
  }
  const std::string& task() const override { return task_.name(); }
  std::string task_description() const override { return task_.description(); }
  nn::Module& module() override { return model_; }

  Step step(nn::Rng& data, nn::Rng& noise, const TrainOptions& o) override {
    const Batch batch = make_batch(model_.vocab(), task_.batch(data, Split::train, o.batch_size));
    const Tensor logits = model_.forward(batch, true, noise);
    const int64_t v = logits.dim(2);
    const nn::CrossEntropy ce = nn::cross_entropy(
        logits.reshape({batch.size * batch.target_length, v}), batch.target_out, o.label_smoothing);
    if (std::isfinite(ce.loss)) model_.backward(ce.dlogits.reshape(logits.shape()));
    return {ce.loss, ce.correct, ce.count, batch.source_tokens + batch.target_tokens};
  }

  double evaluate(int64_t n) override {
    if (static_cast<int64_t>(validation_.size()) != n) validation_ = validation_set(task_, n);
    return teacher_forced_accuracy(model_, validation_);
  }

  void test(int64_t n, TrainSummary& s) override {
    if (n <= 0) return;
    const std::vector<Example> examples = test_set(task_, n);
    std::vector<std::string> outputs;
    s.test_accuracy = greedy_accuracy(model_, examples, &outputs);
    for (std::size_t i = 0; i < examples.size() && s.mistakes.size() < 3; ++i)
      if (outputs[i] != examples[i].target) s.mistakes.emplace_back(examples[i], outputs[i]);
  }

  void save(const std::string& path, const std::map<std::string, std::string>& extra) override {
    model_.save(path, extra);
  }

  std::string architecture() const override {
    return std::string(to_string(model_.config().architecture));
  }
  std::vector<std::pair<std::string, int64_t>> sizes() const override {
    const Seq2SeqConfig& c = model_.config();
    return {{"layers", c.layers},
            {"heads", c.heads},
            {"d_model", c.d_model},
            {"ffn_hidden", c.hidden()},
            {"vocab", model_.vocab().size()}};
  }
  std::string description() override {
    const Seq2SeqConfig& c = model_.config();
    const std::string parameters = grouped(model_.parameter_count()) + " parameters";
    if (c.architecture == Seq2SeqArchitecture::rnnsearch)
      return "RNNsearch: bidirectional GRU encoder (" + std::to_string(c.d_model / 2) + " + " +
             std::to_string(c.d_model / 2) + " units),\n             GRU decoder (" +
             std::to_string(c.d_model) + "), additive attention, " + parameters;
    return std::to_string(c.layers) + " encoder + " + std::to_string(c.layers) +
           " decoder blocks, " + std::to_string(c.heads) + " heads, d_model " +
           std::to_string(c.d_model) + ", " + parameters;
  }
  std::optional<std::string> sample_input() const override {
    return test_set(task_, 1).front().source;
  }

 private:
  std::unique_ptr<Seq2Seq> owned_;
  Seq2Seq& model_;
  Task task_;
  std::vector<Example> validation_;
};

}  // namespace

std::unique_ptr<Trainable> trainable(Seq2Seq& model, const Task& task) {
  return std::make_unique<Seq2SeqTrainable>(model, task);
}

namespace train_detail {
std::unique_ptr<Trainable> owning_trainable(std::unique_ptr<Seq2Seq> model, Task task) {
  Seq2Seq& m = *model;
  return std::make_unique<Seq2SeqTrainable>(m, std::move(task), std::move(model));
}
}  // namespace train_detail

}  // namespace qkv
