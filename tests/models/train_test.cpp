// The one training loop's registry, plan, options, metadata and early stop (qkv/train.h), for
// both families.
#include "qkv/train.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string flag(std::string_view field, std::string_view value) {
  return "--" + std::string(field) + (value.empty() ? "" : " " + std::string(value));
}

// The message of the FieldError `run` throws, as a front end naming fields --field shows it.
template <typename F>
std::string field_error(F run, std::string* field = nullptr) {
  try {
    run();
  } catch (const FieldError& e) {
    if (field) *field = e.field();
    return e.message(flag);
  }
  ADD_FAILURE() << "expected a FieldError";
  return "";
}

TEST(TrainingTasks, ListsEveryTaskOnceWithItsModelsAndDefaults) {
  std::vector<std::string> names;
  for (const TaskInfo& t : training_tasks()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("reverse", "sort", "copy", "dates", "lookup", "follow", "count"));
  EXPECT_EQ(training_task("dates").options.steps, 6000);
  EXPECT_EQ(training_task("lookup").options.steps, 6000);
  EXPECT_EQ(training_task("reverse").options.steps, 4000);
  EXPECT_THAT(training_task("copy").models, ElementsAre("transformer", "rnnsearch"));
  const TaskInfo& count = training_task("count");
  EXPECT_THAT(count.models, ElementsAre("perceiver"));
  EXPECT_EQ(count.options.steps, 1500);
  EXPECT_EQ(count.options.label_smoothing, 0);
  EXPECT_EQ(count.options.eval_examples, 500);
  EXPECT_EQ(count.length, 1024);
  EXPECT_EQ(count.latents, 16);
  EXPECT_EQ(training_task("sort").description, make_task("sort").description());
  std::string field;
  EXPECT_EQ(field_error([] { training_task("nope"); }, &field),
            "unknown task 'nope'; expected one of reverse, sort, copy, dates, lookup, follow, "
            "count");
  EXPECT_EQ(field, "task");
}

TEST(TrainingModels, DescribeEachModelNamingFieldsNotFlags) {
  std::vector<std::string> names;
  for (const TrainableModel& m : training_models()) {
    names.push_back(m.name);
    EXPECT_EQ(m.description.find("--"), std::string::npos) << m.description;
  }
  EXPECT_THAT(names, ElementsAre("transformer", "rnnsearch", "perceiver"));
  const std::string rnn = FieldError::render(training_models()[1].description, flag);
  EXPECT_THAT(rnn, HasSubstr("RNNsearch (--model rnnsearch, Bahdanau et al. 2014)"));
  EXPECT_THAT(rnn, HasSubstr("s_{i-1}"));  // braces that name no field stay
  EXPECT_THAT(rnn, HasSubstr("--d_model sets the width"));
}

TEST(TrainPlan, FillsTheTasksDefaultsAndTheRequestsValues) {
  const TrainPlan p = plan_training({.task = "dates",
                                     .model = "rnnsearch",
                                     .d_model = 32,
                                     .batch_size = 8,
                                     .lr = 0.002,
                                     .seed = 7});
  ASSERT_TRUE(p.seq2seq);
  EXPECT_FALSE(p.perceiver);
  EXPECT_EQ(p.seq2seq->architecture, Seq2SeqArchitecture::rnnsearch);
  EXPECT_EQ(p.seq2seq->d_model, 32);
  EXPECT_EQ(p.options.steps, 6000);  // dates' default
  EXPECT_EQ(p.options.batch_size, 8);
  EXPECT_EQ(p.options.lr, 0.002);
  EXPECT_EQ(p.options.seed, 7u);
  EXPECT_EQ(p.what(), "training this rnnsearch (1 layers, d_model 32, batch 8)");
  EXPECT_EQ(p.smaller(flag), "a smaller --layers, --d_model or --batch_size");
  EXPECT_EQ(p.bytes(), seq2seq_train_bytes(*p.seq2seq, 8));

  const TrainPlan c = plan_training({.task = "count", .model = "perceiver", .length = 64});
  ASSERT_TRUE(c.perceiver);
  EXPECT_EQ(c.perceiver->length, 64);
  EXPECT_EQ(c.perceiver->latents, 16);
  EXPECT_EQ(c.perceiver->blocks, 2);
  EXPECT_EQ(c.options.steps, 1500);
  EXPECT_EQ(c.smaller(flag), "a smaller --length, --latents, --layers, --d_model or --batch_size");
  EXPECT_EQ(plan_training({.task = "count"}).model, "perceiver");  // the task's default model
}

TEST(TrainPlan, ErrorsNameTheFieldsNeverAFlag) {
  std::string field;
  EXPECT_EQ(field_error([] { plan_training({.task = "copy", .steps = 0}); }, &field),
            "--steps 0 is out of range; expected 1 to 10^8");
  EXPECT_EQ(field, "steps");
  EXPECT_EQ(field_error([] { plan_training({.task = "copy", .batch_size = 70000}); }),
            "--batch_size 70000 is out of range; expected 1 to 65536");
  EXPECT_EQ(field_error([] { plan_training({.task = "copy", .lr = 0.0}); }),
            "--lr 0 is out of range; expected 0 < lr < 10");
  EXPECT_EQ(field_error([] { plan_training({.task = "copy", .d_model = 30}); }),
            "--d_model 30 is not divisible by --heads 4; expected d_model = heads · d_k, e.g. "
            "--d_model 32");
  EXPECT_EQ(field_error([] { plan_training({.task = "copy", .model = "lstm"}); }),
            "--model lstm is not a model qkv trains; expected transformer, rnnsearch or perceiver");
  EXPECT_EQ(field_error([] { plan_training({.task = "count", .model = "transformer"}); }),
            "--task count is the Perceiver's task, not the transformer's; expected --model "
            "perceiver --task count");
  EXPECT_THAT(field_error([] { plan_training({.task = "copy", .model = "perceiver"}); }),
              HasSubstr("--task copy is not a Perceiver task; expected count"));
  EXPECT_THAT(field_error([] { plan_training({.task = "copy", .length = 64}); }, &field),
              HasSubstr("--length applies to --model perceiver only"));
  EXPECT_EQ(field, "length");
  EXPECT_THAT(
      field_error([] { plan_training({.task = "copy", .model = "rnnsearch", .heads = 2}); }),
      HasSubstr("--heads does not apply to --model rnnsearch"));
  EXPECT_EQ(field_error([] { plan_training({.task = "count", .layers = 65}); }),
            "--layers 65 is out of range; expected 0 to 64");
  EXPECT_EQ(field_error([] { plan_training({.task = "count", .d_model = 30}); }),
            "--d_model 30 is not a multiple of --heads 4");
}

TEST(TrainedMetadata, IsWhatQkvExplainReads) {
  TrainSummary s;
  s.steps = 120;
  s.seed = 9;
  s.test_accuracy = 0.98765;
  EXPECT_EQ(trained_metadata(s),
            (std::map<std::string, std::string>{
                {"qkv.steps", "120"}, {"qkv.seed", "9"}, {"qkv.test_accuracy", "0.9877"}}));
}

// The Perceiver on the one loop: the early-stop rule and reached_target of the sequence models,
// its chance and its input symbols as tokens, its seed streams (same seed, same numbers).
TEST(TrainLoop, ThePerceiverRunsOnTheOneLoop) {
  const TrainPlan plan = plan_training({.task = "count",
                                        .d_model = 16,
                                        .length = 16,
                                        .latents = 2,
                                        .steps = 20,
                                        .batch_size = 8,
                                        .eval_every = 10,
                                        .test_examples = 20,
                                        .seed = 5});
  std::vector<int64_t> evaluated;
  const TrainSummary a = train(*plan.make(5), plan.options, [&](const TrainProgress& p) {
    if (p.evaluated) evaluated.push_back(p.step);
  });
  EXPECT_THAT(evaluated, ElementsAre(10, 20));
  EXPECT_EQ(a.steps, 20);
  EXPECT_EQ(a.seed, 5u);
  EXPECT_EQ(a.tokens, 20 * 8 * 16);
  ASSERT_TRUE(a.chance);
  EXPECT_DOUBLE_EQ(*a.chance, 0.1);
  EXPECT_EQ(a.test_examples, 20);
  EXPECT_EQ(plan.make(5)->task_description(),
            "count the '#' among 16 letters a–z: 0 to 9 of them, the class is how many");
  const TrainSummary b = train(*plan.make(5), plan.options);
  EXPECT_EQ(a.final_loss, b.final_loss);
  EXPECT_EQ(a.test_accuracy, b.test_accuracy);
  // A target of 0 is reached beyond doubt at the first evaluation.
  TrainOptions early = plan.options;
  early.target_accuracy = 0;
  const TrainSummary c = train(*plan.make(5), early);
  EXPECT_TRUE(c.stopped_early);
  EXPECT_EQ(c.steps, 10);
  EXPECT_EQ(c.reached_target, 10);
}

TEST(TrainLoop, RefusesAModelMadeForAnotherTask) {
  auto model = make_model(config_for(make_task("copy"), 1, 2, 8), 1);
  std::string field;
  EXPECT_THAT(field_error([&] { train(*model, make_task("sort"), TrainOptions{}); }, &field),
              HasSubstr("the model was made for task copy, not sort"));
  EXPECT_EQ(field, "task");
}

}  // namespace
}  // namespace qkv
