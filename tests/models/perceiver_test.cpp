// The Perceiver of qkv/perceiver.h: its task generator, an end-to-end float64 gradient check, a
// save/load round trip, and a short run that must learn to count (what each latent gathers:
// tests/explain/readings_test.cpp).
#include "qkv/perceiver.h"
#include "qkv/train.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/safetensors.h"
#include "nn/gradcheck.h"
#include "qkv/model.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-perceiver-" + name)).string();
}

PerceiverConfig tiny_config(const PerceiverTask& task) {
  return {.length = task.length,
          .vocab = static_cast<int64_t>(task.alphabet.size()),
          .classes = task.classes,
          .latents = 3,
          .d_model = 8,
          .heads = 2,
          .blocks = 1};
}

TEST(PerceiverTask, CountsTheHashesItPlaces) {
  const PerceiverTask task = make_perceiver_task("count", 1024);
  EXPECT_EQ(task.alphabet, "abcdefghijklmnopqrstuvwxyz#");
  EXPECT_EQ(task.counted(), '#');
  nn::Rng rng(1);
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 500; ++i) {
    const PerceiverExample e = task.generate(rng);
    ASSERT_EQ(e.input.size(), 1024u);
    ASSERT_EQ(std::count(e.input.begin(), e.input.end(), '#'), e.label) << "example " << i;
    ASSERT_TRUE(std::all_of(e.input.begin(), e.input.end(),
                            [](char c) { return c == '#' || (c >= 'a' && c <= 'z'); }));
    ++seen[static_cast<std::size_t>(e.label)];
  }
  // every count 0–9 about equally often: 50 expected each, 5 standard deviations ≈ 33
  for (int c = 0; c < 10; ++c) EXPECT_GT(seen[static_cast<std::size_t>(c)], 17) << "count " << c;
}

TEST(PerceiverTask, EncodesSymbolsAsAlphabetIdsAndRejectsOthers) {
  const PerceiverTask task = make_perceiver_task("count", 16);
  const std::vector<int32_t> ids = task.encode("ab#zaaaaaaaaaaaa");
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(ids[2], 26);
  EXPECT_EQ(ids[3], 25);
  try {
    task.encode("abcdefghijklmnoP");
    FAIL() << "an upper-case letter was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'P' at position 15"));
  }
  EXPECT_THROW(task.encode("abc"), Error);
  EXPECT_THROW(make_perceiver_task("sum", 1024), Error);
  EXPECT_THROW(make_perceiver_task("count", 8), Error);
}

TEST(PerceiverTask, HeldOutSetsAreFixedAndDiffer) {
  const PerceiverTask task = make_perceiver_task("count", 64);
  const auto a = perceiver_test_set(task, 3), b = perceiver_test_set(task, 3);
  const auto v = perceiver_validation_set(task, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].input, b[i].input);
    EXPECT_NE(a[i].input, v[i].input);
  }
}

// The whole model in float64: the loss Σ r ⊙ logits against central differences, for a sample
// of every parameter's entries (the latents' gradient sums over the batch; the embedding's comes
// through the keys and values alone).
TEST(PerceiverModel, GradientsMatchFiniteDifferencesEndToEnd) {
  const PerceiverTask task = make_perceiver_task("count", 16);
  nn::Rng init(3), data(5);
  Perceiver model(tiny_config(task), init, DType::f64);
  std::vector<std::vector<int32_t>> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(task.encode(task.generate(data).input));
  const Tensor logits = model.forward(ids);
  ASSERT_EQ(logits.shape(), (Shape{3, 10}));
  const Tensor r = test::random_f64(logits.shape(), 9);
  model.zero_grad();
  model.backward(r);
  auto loss = [&] { return test::dot_loss(r, model.forward(ids)); };
  double worst = 0;
  for (nn::Parameter* p : model.parameters()) {
    SCOPED_TRACE(p->name);
    const Tensor analytic = p->grad.clone();
    const double error = test::gradient_error(p->value, analytic, loss, 8);
    worst = std::max(worst, error);
    EXPECT_LE(error, test::kGradTolerance);
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::cout << "[ worst FD relative error " << worst << " ]\n";
}

TEST(PerceiverModel, ParametersAreNamedAfterTheirPart) {
  const PerceiverTask task = make_perceiver_task("count", 16);
  nn::Rng init(1);
  Perceiver model(tiny_config(task), init);
  std::vector<std::string> names;
  for (nn::Parameter* p : model.parameters()) names.push_back(p->name);
  EXPECT_THAT(names, ::testing::Contains("latents"));
  EXPECT_THAT(names, ::testing::Contains("cross.q.weight"));
  EXPECT_THAT(names, ::testing::Contains("blocks.0.attention.q.weight"));
  EXPECT_THAT(names, ::testing::Contains("head.weight"));
  EXPECT_EQ(model.latents.value.shape(), (Shape{3, 8}));
}

TEST(PerceiverModel, SaveLoadRoundTripKeepsConfigAndOutputs) {
  const PerceiverTask task = make_perceiver_task("count", 32);
  nn::Rng init(7), data(1);
  Perceiver model(tiny_config(task), init);
  std::vector<std::vector<int32_t>> ids = {task.encode(task.generate(data).input),
                                           task.encode(task.generate(data).input)};
  const Tensor before = model.forward(ids).clone();
  const std::string path = temp_path("roundtrip.safetensors");
  model.save(path, {{"qkv.note", "hello"}});
  EXPECT_EQ(model_kind(path), ModelKind::perceiver);
  std::map<std::string, std::string> metadata;
  auto loaded = Perceiver::load(path, &metadata);
  EXPECT_EQ(metadata.at("qkv.note"), "hello");
  EXPECT_EQ(loaded->config().length, 32);
  EXPECT_EQ(loaded->config().latents, 3);
  EXPECT_EQ(loaded->config().d_model, 8);
  const Tensor after = loaded->forward(ids);
  ASSERT_EQ(after.shape(), before.shape());
  for (int64_t i = 0; i < before.numel(); ++i)
    ASSERT_EQ(after.data<float>()[i], before.data<float>()[i]) << "logit " << i;
  std::filesystem::remove(path);
}

TEST(PerceiverModel, LoadingAnotherFileSaysSo) {
  const std::string path = temp_path("plain.safetensors");
  write_safetensors(path, {{"w", Tensor::full({2}, 1.0)}});
  EXPECT_NE(model_kind(path), ModelKind::perceiver);
  EXPECT_EQ(model_kind(temp_path("missing.safetensors")), ModelKind::seq2seq);
  try {
    Perceiver::load(path);
    FAIL() << "a plain safetensors file loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a Perceiver"));
  }
  std::filesystem::remove(path);
}

// 10 classes: chance is a loss of ln 10 = 2.30 and 10% accuracy. A few hundred steps on 64
// symbols must leave both far behind.
TEST(PerceiverTraining, LearnsToCountOnAShortInput) {
  const PerceiverTask task = make_perceiver_task("count", 64);
  nn::Rng init(1);
  Perceiver model({.length = 64, .latents = 8, .d_model = 32, .heads = 4, .blocks = 1}, init);
  const TrainSummary s = train(model, task,
                               {.steps = 400,
                                .batch_size = 32,
                                .label_smoothing = 0,
                                .target_accuracy = 2,
                                .eval_every = 100,
                                .eval_examples = 200,
                                .test_examples = 300});
  EXPECT_EQ(s.steps, 400);
  std::cout << "[ final loss " << s.final_loss << ", held-out " << s.test_accuracy << " ]\n";
  EXPECT_LT(s.final_loss, 1.0) << "chance is 2.30";     // measured 0.58
  EXPECT_GT(s.test_accuracy, 0.6) << "chance is 0.10";  // measured 0.93
}

}  // namespace
}  // namespace qkv
