// explain::capture of a trained encoder-decoder (an untrained one here: the record does not care):
// one explain::Run with the cross-, encoder self- and decoder self-attention blocks, the decoded
// output, and the views that read it — the report's blocks and the JSON document.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "qkv/explain.h"
#include "qkv/tasks.h"

namespace qkv::explain {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<Seq2Seq> reverse_model() {
  const Task task = make_task("reverse", {.min_length = 2, .max_length = 6, .symbols = 4});
  nn::Rng rng(7);
  return make_seq2seq(config_for(task, 2, 2, 8), rng);
}

TEST(Seq2SeqCaptureRun, OneRecordWithThreeBlocksAndTheDecodedOutput) {
  const std::unique_ptr<Seq2Seq> model = reverse_model();
  const Seq2SeqCapture c = model->capture("abc");
  const explain::Run run = capture(*model, "abc", "tiny.safetensors", {{"qkv.steps", "5"}});
  EXPECT_EQ(run.model.name, "tiny.safetensors");
  EXPECT_EQ(run.model.family, "transformer");
  EXPECT_EQ(run.model.task, "reverse");
  EXPECT_EQ(run.model.layers, 2);
  EXPECT_EQ(run.model.metadata.at("qkv.steps"), "5");
  EXPECT_EQ(run.text, "abc");
  ASSERT_EQ(run.tokens.size(), 3u);
  EXPECT_EQ(run.tokens[1].begin, 1);  // one source character a token
  EXPECT_EQ(run.tokens[1].end, 2);
  EXPECT_EQ(run.output.decoded, c.output);
  EXPECT_EQ(run.output.steps, c.output_tokens);
  ASSERT_EQ(run.blocks.size(), 3u);
  EXPECT_EQ(run.blocks[0].kind, BlockKind::cross_attention);
  EXPECT_EQ(run.blocks[1].name, "encoder self-attention");
  EXPECT_TRUE(run.blocks[2].causal);
  EXPECT_THAT(run.blocks[0].kv_head, ElementsAre(0, 1));
  // The alignment is the cross block's weights.
  const Tensor a = alignment(run, 1);
  for (int64_t t = 0; t < a.dim(1); ++t)
    for (int64_t j = 0; j < a.dim(2); ++j)
      EXPECT_EQ(a.at<double>(1, t, j), c.cross[1].weights.value((1 * a.dim(1) + t) * 3 + j));

  const Report r = report_of("tiny", run);
  EXPECT_EQ(r.source, ReportSource::seq2seq);
  ASSERT_EQ(r.blocks.size(), 3u);
  EXPECT_EQ(r.layer, 1);                               // the last layer's cross-attention first
  EXPECT_EQ(r.blocks[0].layers[0].weights.dim(0), 2);  // the batch of one dropped
  EXPECT_FALSE(r.blocks[0].layers[0].scores.defined());

  const nlohmann::json j =
      nlohmann::json::parse(json_of(run, {.layer = 1, .head = 0, .model_path = "tiny"}));
  EXPECT_EQ(j.at("architecture"), "transformer");
  EXPECT_EQ(j.at("output"), c.output);
  EXPECT_EQ(j.at("heads").size(), 2u);
  EXPECT_EQ(j.at("entropy").size(), 2u);
  EXPECT_EQ(j.at("steps").size(), c.output_tokens.size());
  // Unset, the layer is the last (as the views open on it), not the sentence's "every layer".
  const nlohmann::json d = nlohmann::json::parse(json_of(run));
  EXPECT_EQ(d.at("layer"), 1);
  EXPECT_EQ(d.at("heads"), j.at("heads"));
}

}  // namespace
}  // namespace qkv::explain

namespace qkv::explain {
namespace {

// The registry's model around an untrained seq2seq model, as its family's entry makes one.
Model registry_model(std::map<std::string, std::string> metadata) {
  std::shared_ptr<Seq2Seq> model = reverse_model();
  const Seq2SeqConfig& c = model->config();
  return Model({.kind = ModelKind::seq2seq,
                .family = "transformer",
                .name = "tiny.safetensors",
                .path = "dir/tiny.safetensors",
                .layers = c.layers,
                .heads = c.heads},
               std::move(model), std::move(metadata));
}

TEST(Seq2SeqCaptureRun, TheOneEntryPointChecksTheMetadataTheViewsShow) {
  const Model model = registry_model({{"qkv.steps", "300"}, {"qkv.test_accuracy", "0.5"}});
  const explain::Run run = capture(model, {.text = "abc"});
  EXPECT_EQ(run.model.name, "tiny.safetensors");
  EXPECT_EQ(run.model.family, "transformer");
  EXPECT_EQ(run.output.steps.size(), run.blocks[0].layers[0].weights.dim(2));
  EXPECT_EQ(run_cost(model, {.text = "abc"}, false, false).what,
            "explaining dir/tiny.safetensors (every attention layer's weights kept)");
  EXPECT_EQ(default_input(model).text.empty(), false);  // a held-out source of the task
  // The checker refuses what the view could not show: an accuracy above 1, steps not a number.
  for (const auto& [key, value] :
       {std::pair{"qkv.test_accuracy", "1.5"}, std::pair{"qkv.test_accuracy", "nan"},
        std::pair{"qkv.steps", "12abc"}}) {
    try {
      capture(registry_model({{key, value}}), {.text = "abc"});
      ADD_FAILURE() << key << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("dir/tiny.safetensors: the metadata's " +
                                                 std::string(key) + " is \"" + value + "\""));
    }
  }
}

TEST(Seq2SeqCaptureRun, SourcesAreCheckedAgainstTheVocabularyAndLength) {
  const std::unique_ptr<Seq2Seq> model = reverse_model();
  EXPECT_NO_THROW(check_source(*model, "abc"));
  EXPECT_THROW(check_source(*model, "ABC"), Error);
  try {
    check_source(*model,
                 std::string(static_cast<std::size_t>(model->config().max_source + 1), 'a'));
    ADD_FAILURE() << "a source past max_source was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("characters; the model reads at most"));
  }
}

TEST(Seq2SeqCaptureRun, FocusNamesATokenOrSaysWhichThereAre) {
  explain::Run run;
  for (const char* t : {"[CLS]", "it", "was", "it", "[SEP]"}) run.tokens.push_back({.text = t});
  run.tokens[0].special = run.tokens[4].special = true;
  EXPECT_EQ(focus(run, std::nullopt), 1);  // the first pronoun
  EXPECT_EQ(focus(run, std::string("it:2")), 3);
  EXPECT_EQ(focus(run, std::string("2")), 2);
  try {
    focus(run, std::string("cat"));
    ADD_FAILURE() << "cat was found";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "'cat' is not a token of the text; expected one of: [CLS] it was it [SEP] (or an "
                 "index 0-4)");
  }
}

}  // namespace
}  // namespace qkv::explain
