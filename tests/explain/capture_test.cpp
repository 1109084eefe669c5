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
}

}  // namespace
}  // namespace qkv::explain
