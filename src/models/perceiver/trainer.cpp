// The Perceiver as a Trainable of the one training loop (models/train/train.cpp): a step on a
// batch of its task, the held-out accuracy, the final test; and its fixed held-out sets.
#include <cmath>

#include "models/train/trainables.h"
#include "qkv/perceiver.h"
#include "qkv/train.h"

namespace qkv {

namespace {

std::vector<PerceiverExample> examples(const PerceiverTask& task, int64_t n, nn::Rng rng) {
  std::vector<PerceiverExample> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(task.generate(rng));
  return out;
}

class PerceiverTrainable : public Trainable {
 public:
  PerceiverTrainable(Perceiver& model, PerceiverTask task, std::unique_ptr<Perceiver> owned = {})
      : owned_(std::move(owned)), model_(model), task_(std::move(task)) {
    const PerceiverConfig& c = model_.config();
    if (c.length != task_.length || c.classes != task_.classes ||
        c.vocab != static_cast<int64_t>(task_.alphabet.size()))
      throw FieldError("task", "the model reads " + std::to_string(c.length) + " symbols into " +
                                   std::to_string(c.classes) + " classes but the {task} has " +
                                   std::to_string(task_.length) + " and " +
                                   std::to_string(task_.classes));
  }
  const std::string& task() const override { return task_.name; }
  std::string task_description() const override { return task_.description; }
  nn::Module& module() override { return model_; }

  Step step(nn::Rng& data, nn::Rng&, const TrainOptions& o) override {
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < o.batch_size; ++i) {
      const PerceiverExample e = task_.generate(data);
      ids.push_back(task_.encode(e.input));
      labels.push_back(e.label);
    }
    const nn::CrossEntropy ce = nn::cross_entropy(model_.forward(ids), labels, o.label_smoothing);
    if (std::isfinite(ce.loss)) model_.backward(ce.dlogits);
    return {ce.loss, ce.correct, ce.count, o.batch_size * task_.length};
  }

  double evaluate(int64_t n) override {
    if (static_cast<int64_t>(validation_.size()) != n)
      validation_ = perceiver_validation_set(task_, n);
    return perceiver_accuracy(model_, task_, validation_);
  }

  void test(int64_t n, TrainSummary& s) override {
    s.chance = 1.0 / static_cast<double>(task_.classes);
    if (n > 0) s.test_accuracy = perceiver_accuracy(model_, task_, perceiver_test_set(task_, n));
  }

  void save(const std::string& path, const std::map<std::string, std::string>& extra) override {
    model_.save(path, extra);
  }

  std::string architecture() const override { return "perceiver"; }
  std::vector<std::pair<std::string, int64_t>> sizes() const override {
    const PerceiverConfig& c = model_.config();
    return {{"layers", c.blocks},   {"heads", c.heads},   {"d_model", c.d_model},
            {"latents", c.latents}, {"length", c.length}, {"classes", c.classes},
            {"vocab", c.vocab}};
  }
  std::string description() override {
    const PerceiverConfig& c = model_.config();
    return std::to_string(c.latents) + " latent queries (d " + std::to_string(c.d_model) + ", " +
           std::to_string(c.heads) + " heads) cross-attend to " + grouped(c.length) +
           " symbols,\n             then " + std::to_string(c.blocks) +
           " latent self-attention block" + (c.blocks == 1 ? "" : "s") + "; " +
           grouped(model_.parameter_count()) + " parameters";
  }
  std::optional<std::string> sample_input() const override { return std::nullopt; }

 private:
  std::unique_ptr<Perceiver> owned_;
  Perceiver& model_;
  PerceiverTask task_;
  std::vector<PerceiverExample> validation_;
};

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

std::unique_ptr<Trainable> trainable(Perceiver& model, const PerceiverTask& task) {
  return std::make_unique<PerceiverTrainable>(model, task);
}

namespace train_detail {
std::unique_ptr<Trainable> owning_trainable(std::unique_ptr<Perceiver> model, PerceiverTask task) {
  Perceiver& m = *model;
  return std::make_unique<PerceiverTrainable>(m, std::move(task), std::move(model));
}
}  // namespace train_detail

}  // namespace qkv
