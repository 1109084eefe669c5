// RNNsearch (Bahdanau et al. 2014) as `qkv train --model rnnsearch` builds it: an end-to-end
// float64 gradient check through the encoder, the decoder steps and the additive attention;
// the alignment it hands back; its capture against the equations worked here by hand; save and
// load; the config's checks; and a short training run that must cut the loss.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "nn/gradcheck.h"
#include "qkv/model.h"
#include "qkv/train.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

constexpr TaskOptions kTiny = {.min_length = 2, .max_length = 5, .symbols = 4};

Task tiny_task() { return make_task("reverse", kTiny); }

// config_for takes sizes from the task; the options it was made with go in by hand (a Task does
// not keep them), so that a saved model names the task it reads.
Seq2SeqConfig tiny_config(int64_t d) {
  Seq2SeqConfig c = rnnsearch_config_for(tiny_task(), d);
  c.task_options = kTiny;
  return c;
}

std::unique_ptr<Seq2Seq> tiny_rnnsearch(DType dtype, int64_t d = 6, uint64_t seed = 3) {
  nn::Rng init(seed);
  return make_seq2seq(tiny_config(d), init, dtype);
}

// Every parameter against central differences, on a batch of sources of different lengths (the
// padding must neither change a real output nor receive gradient).
TEST(RnnSearch, GradientsMatchFiniteDifferencesEndToEnd) {
  const auto model = tiny_rnnsearch(DType::f64);
  nn::Rng rng(0);
  const Batch batch = make_batch(model->vocab(), {{"ab", "ba"}, {"dcab", "badc"}, {"c", "c"}});
  const Tensor logits = model->forward(batch, false, rng);
  Tensor r = test::random_f64(logits.shape(), 9);
  for (int64_t i = 0; i < batch.size; ++i)  // no loss on the decoder's padding steps
    for (int64_t t = batch.target_lengths[static_cast<std::size_t>(i)]; t < batch.target_length;
         ++t)
      for (int64_t v = 0; v < r.dim(2); ++v) r.at<double>(i, t, v) = 0;
  model->zero_grad();
  model->backward(r);
  auto loss = [&] { return test::dot_loss(r, model->forward(batch, false, rng)); };
  double worst = 0;
  for (nn::Parameter* p : model->parameters()) {
    SCOPED_TRACE(p->name);
    const Tensor analytic = p->grad.clone();
    const double e = test::gradient_error(p->value, analytic, loss, 24);
    EXPECT_LE(e, test::kGradTolerance);
    worst = std::max(worst, e);
  }
  RecordProperty("worst_relative_error", ::testing::PrintToString(worst));
  // The check can fail: a gradient off by 1% in one entry is caught.
  nn::Parameter* va = nullptr;
  for (nn::Parameter* p : model->parameters())
    if (p->name == "attention.v_a") va = p;
  ASSERT_NE(va, nullptr);
  Tensor wrong = va->grad.clone();
  wrong.data<double>()[0] *= 1.01;
  EXPECT_GT(test::gradient_error(va->value, wrong, loss, 24), 100 * test::kGradTolerance);
}

// The query is s_{i−1}, the keys and the values the annotations h_j: the captured head output
// is Σ_j α_ij h_j, the logits are v_aᵀ tanh(W_a s + U_a h_j) computed here from the parameters,
// and the weights equal greedy decoding's alignment.
TEST(RnnSearch, CaptureIsTheAdditiveAttentionOfTheDecoderStateOverTheAnnotations) {
  const auto model = tiny_rnnsearch(DType::f64, 6, 5);
  const std::string source = "dcab";
  const Seq2SeqCapture c = model->capture(source);
  ASSERT_EQ(c.cross.size(), 1u);
  EXPECT_TRUE(c.encoder.empty());
  EXPECT_TRUE(c.decoder_self.empty());
  const AttentionCapture& a = c.cross[0];
  EXPECT_EQ(a.score, Score::additive);
  const int64_t steps = a.q.dim(2), n = a.k.dim(2), d = a.q.dim(3);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(steps, static_cast<int64_t>(c.output_tokens.size()));
  std::map<std::string, const Tensor*> p;
  for (nn::Parameter* x : model->parameters()) p[x->name] = &x->value;
  const Tensor &wa = *p.at("attention.w_a"), &ua = *p.at("attention.u_a.weight"),
               &va = *p.at("attention.v_a");
  for (int64_t i = 0; i < steps; ++i) {
    double row = 0;
    for (int64_t j = 0; j < n; ++j) {
      double e = 0;
      for (int64_t r = 0; r < d; ++r) {
        double x = 0;
        for (int64_t k = 0; k < d; ++k)
          x += wa.at<double>(r, k) * a.q.at<double>(0, 0, i, k) +
               ua.at<double>(r, k) * a.k.at<double>(0, 0, j, k);
        e += va.at<double>(r) * std::tanh(x);
      }
      EXPECT_NEAR(a.logits.at<double>(0, 0, i, j), e, 1e-12);
      row += a.weights.at<double>(0, 0, i, j);
    }
    EXPECT_NEAR(row, 1.0, 1e-12);
    for (int64_t k = 0; k < d; ++k) {
      double context = 0;
      for (int64_t j = 0; j < n; ++j)
        context += a.weights.at<double>(0, 0, i, j) * a.v.at<double>(0, 0, j, k);
      EXPECT_NEAR(a.head_out.at<double>(0, 0, i, k), context, 1e-12);
    }
  }
  const Seq2Seq::Decoded decoded = model->greedy_decode({source}, 0);
  EXPECT_EQ(decoded.outputs[0], c.output);
  const Tensor& alignment = decoded.alignment.at(0);  // [1, steps, S]
  ASSERT_EQ(alignment.shape(), (Shape{1, steps, n}));
  for (int64_t i = 0; i < steps; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(alignment.at<double>(0, i, j), a.weights.at<double>(0, 0, i, j), 1e-12);
}

TEST(RnnSearch, BatchedGreedyDecodingEqualsOneSourceAtATime) {
  const auto model = tiny_rnnsearch(DType::f32, 8, 11);
  const std::vector<std::string> sources = {"a", "dcab", "bb", "cabda"};
  const Seq2Seq::Decoded together = model->greedy_decode(sources, 0);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Seq2Seq::Decoded alone = model->greedy_decode({sources[i]}, 0);
    EXPECT_EQ(alone.ids[0], together.ids[i]) << sources[i];
    ASSERT_EQ(alone.alignment[0].shape(), together.alignment[i].shape());
    for (int64_t k = 0; k < alone.alignment[0].numel(); ++k)
      EXPECT_NEAR(alone.alignment[0].value(k), together.alignment[i].value(k), 1e-6);
  }
}

TEST(RnnSearch, SaveLoadRoundTripKeepsTheArchitectureAndTheOutputs) {
  const auto model = tiny_rnnsearch(DType::f32, 8);
  nn::Rng data(1), rng(0);
  const Batch batch = make_batch(model->vocab(), tiny_task().batch(data, Split::test, 4));
  const Tensor before = model->forward(batch, false, rng).clone();
  const std::string path =
      (std::filesystem::temp_directory_path() / "qkv-rnnsearch-roundtrip.safetensors").string();
  model->save(path);
  const auto loaded = Seq2Seq::load(path);
  std::filesystem::remove(path);
  EXPECT_EQ(loaded->config().architecture, Seq2SeqArchitecture::rnnsearch);
  EXPECT_EQ(loaded->parameter_count(), model->parameter_count());
  const Tensor after = loaded->forward(batch, false, rng);
  ASSERT_EQ(after.shape(), before.shape());
  for (int64_t i = 0; i < before.numel(); ++i)
    ASSERT_EQ(after.data<float>()[i], before.data<float>()[i]) << "logit " << i;
}

TEST(RnnSearch, ConfigRefusesWhatItDoesNotHave) {
  Seq2SeqConfig c = tiny_config(8);
  EXPECT_NO_THROW(c.validate());
  c.layers = 2;
  EXPECT_THROW(c.validate(), Error);
  c = tiny_config(7);
  try {
    c.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("d_model 7 is out of range; expected an even width"));
  }
  c = tiny_config(8);
  c.attention.score = Score::scaled_dot;
  EXPECT_THROW(c.validate(), Error);
  // The architecture round-trips through the metadata; a wrong name is named.
  const std::string text = config_to_metadata(tiny_config(8));
  EXPECT_EQ(config_from_metadata(text, "m.safetensors").architecture,
            Seq2SeqArchitecture::rnnsearch);
  nlohmann::json j = nlohmann::json::parse(text);
  j["architecture"] = "lstm";
  try {
    config_from_metadata(j.dump(), "m.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("m.safetensors: the metadata's qkv.config \"architecture\" is "
                                    "\"lstm\"; expected transformer or rnnsearch"));
  }
}

TEST(RnnSearch, ShortTrainingCutsTheLoss) {
  const Task task = tiny_task();
  const auto model = make_model(rnnsearch_config_for(task, 32), 1);
  const TrainSummary s = train(*model, task,
                               {.steps = 150,
                                .batch_size = 32,
                                .lr = 3e-3,
                                .target_accuracy = 2,
                                .eval_every = 50,
                                .eval_examples = 100,
                                .test_examples = 100});
  ASSERT_EQ(s.history.size(), 3u);
  // Uniform guessing over the 7 ids costs ln 7 = 1.95 nats a token (plus label smoothing).
  EXPECT_LT(s.history.back().loss, 0.75 * std::log(7.0));
  EXPECT_LT(s.history.back().loss, s.history.front().loss);
}

}  // namespace
}  // namespace qkv
