// The model registry (qkv/model.h): every registered family, opened through the one door with the
// small models the tests make (the installed all-MiniLM-L6-v2 for BERT), says what it is and what
// it can do, and hands back its own interface — and no other.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/tiny_llama_gguf.h"
#include "qkv/model.h"
#include "qkv/train.h"

namespace qkv {
namespace {

std::set<std::string> capability_names(const ModelInfo& info) {
  std::set<std::string> names;
  for (const Capability c : info.capabilities) names.insert(std::string(to_string(c)));
  return names;
}

// The message of the qkv::Error `f` throws ("(no error)" if none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelRegistry, ListsEveryFamilyOnceWithItsKind) {
  std::set<ModelKind> kinds;
  std::set<std::string> names;
  for (const ModelFamily& f : model_families()) {
    kinds.insert(f.kind);
    names.insert(f.name);
    EXPECT_FALSE(f.description.empty()) << f.name;
  }
  EXPECT_EQ(model_families().size(), 4u);
  EXPECT_EQ(kinds, (std::set<ModelKind>{ModelKind::sentence_encoder, ModelKind::causal_lm,
                                        ModelKind::seq2seq, ModelKind::perceiver}));
  EXPECT_EQ(names, (std::set<std::string>{"bert", "llama", "seq2seq", "perceiver"}));
}

TEST(ModelRegistry, OpensTheSentenceEncoderByDirectoryAndByName) {
  for (const std::string& name : {test::minilm_dir(), std::string("minilm"), std::string()}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(model_kind(name), ModelKind::sentence_encoder);
    const Model m = open_model(name);
    EXPECT_EQ(m.info().family, "bert");
    EXPECT_EQ(m.info().name, "all-MiniLM-L6-v2");
    EXPECT_EQ(m.info().layers, 6);
    EXPECT_EQ(m.info().heads, 12);
    EXPECT_EQ(m.info().kv_heads, 12);
    EXPECT_EQ(m.info().d_model, 384);
    EXPECT_EQ(m.info().vocab, 30522);
    EXPECT_EQ(capability_names(m.info()), (std::set<std::string>{"encode"}));
    EXPECT_TRUE(m.can(Capability::encode));
    EXPECT_FALSE(m.can(Capability::generate));
    EXPECT_EQ(m.sentence_model().config().hidden_size, 384);
    EXPECT_EQ(m.sentence_model().embed({"a sentence"}).dim(1), 384);
    EXPECT_TRUE(m.metadata().empty());
    EXPECT_EQ(error_of([&] { m.causal_lm(); }),
              m.info().path + " is a sentence-encoder model, not a causal LM");
  }
}

TEST(ModelRegistry, OpensAGgufDecoderByItsBytesWhateverItsName) {
  const test::ScratchDir dir("qkv-registry");
  const test::TinyLlamaGguf gguf = test::tiny_llama_gguf();
  // An Ollama blob is named by its hash: the magic bytes decide.
  for (const std::string& name : {"tiny.gguf", "sha256-0123abcd"}) {
    SCOPED_TRACE(name);
    const std::string path = gguf.write(dir.path(name));
    EXPECT_EQ(model_kind(path), ModelKind::causal_lm);
    const Model m = open_model(path);
    EXPECT_EQ(m.info().family, "llama");
    EXPECT_EQ(m.info().name, name);
    EXPECT_EQ(m.info().layers, 2);
    EXPECT_EQ(m.info().heads, 4);
    EXPECT_EQ(m.info().kv_heads, 2);
    EXPECT_EQ(m.info().d_model, 16);
    EXPECT_EQ(m.info().vocab, static_cast<int64_t>(test::tiny_llama_tokens().size()));
    EXPECT_EQ(capability_names(m.info()), (std::set<std::string>{"generate"}));
    // Loaded: it runs.
    const Tensor logits = m.causal_lm().logits(m.causal_lm().tokenize("hello"));
    EXPECT_EQ(logits.dim(1), m.info().vocab);
    EXPECT_EQ(error_of([&] { m.seq2seq(); }), path + " is a causal-lm model, not a seq2seq model");
  }
}

TEST(ModelRegistry, OpensADecoderWithoutItsWeightsWhenAsked) {
  const test::ScratchDir dir("qkv-registry");
  const std::string path = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  const Model m = open_model(path, {.load_weights = false});
  EXPECT_EQ(m.info().layers, 2);
  EXPECT_NE(error_of([&] { m.causal_lm().logits({3}); }), "(no error)");  // no weights yet
  m.causal_lm().load_weights();
  EXPECT_EQ(m.causal_lm().logits({3}).dim(1), m.info().vocab);
}

TEST(ModelRegistry, OpensATrainedSeq2SeqOfEitherArchitecture) {
  const test::ScratchDir dir("qkv-registry");
  const Task task = make_task("reverse");
  for (const bool rnnsearch : {false, true}) {
    SCOPED_TRACE(rnnsearch ? "rnnsearch" : "transformer");
    const Seq2SeqConfig config =
        rnnsearch ? rnnsearch_config_for(task, 16) : config_for(task, 1, 2, 16);
    const std::string path = dir.path(rnnsearch ? "r.safetensors" : "t.safetensors");
    make_model(config, 7)->save(path, {{"qkv.steps", "0"}});
    EXPECT_EQ(model_kind(path), ModelKind::seq2seq);
    const Model m = open_model(path);
    EXPECT_EQ(m.info().family, rnnsearch ? "rnnsearch" : "transformer");
    EXPECT_EQ(m.info().layers, config.layers);
    EXPECT_EQ(m.info().heads, config.heads);
    EXPECT_EQ(m.info().d_model, 16);
    EXPECT_EQ(m.info().vocab, task.vocab().size());
    EXPECT_EQ(capability_names(m.info()), (std::set<std::string>{"translate", "train"}));
    EXPECT_EQ(m.metadata().at("qkv.steps"), "0");
    EXPECT_EQ(m.seq2seq().config().task, "reverse");
    EXPECT_EQ(m.seq2seq().greedy_decode({"abc"}).outputs.size(), 1u);
  }
}

TEST(ModelRegistry, OpensAPerceiverByItsMetadataNotItsName) {
  const test::ScratchDir dir("qkv-registry");
  const PerceiverConfig config{
      .length = 16, .vocab = 27, .classes = 4, .latents = 3, .d_model = 8, .heads = 2};
  nn::Rng rng(3);
  Perceiver(config, rng).save(dir.path("p.safetensors"));
  const std::string path = dir.path("p.safetensors");
  EXPECT_EQ(model_kind(path), ModelKind::perceiver);
  const Model m = open_model(path);
  EXPECT_EQ(m.info().family, "perceiver");
  EXPECT_EQ(m.info().heads, 2);
  EXPECT_EQ(m.info().d_model, 8);
  EXPECT_EQ(m.info().vocab, 27);
  EXPECT_EQ(capability_names(m.info()), (std::set<std::string>{"classify", "train"}));
  EXPECT_EQ(m.perceiver().config().classes, 4);
  EXPECT_EQ(error_of([&] { m.seq2seq(); }), path + " is a perceiver model, not a seq2seq model");
}

TEST(ModelRegistry, KindsComeFromNamesAndBytesWithoutOpening) {
  const test::ScratchDir dir("qkv-registry");
  EXPECT_EQ(model_kind("smollm2"), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.path("missing.gguf")), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.path("missing.safetensors")), ModelKind::seq2seq);
  EXPECT_EQ(model_kind(dir.path("some-dir")), ModelKind::sentence_encoder);
  // Not a Perceiver's: a .safetensors file whose header says nothing of one.
  EXPECT_EQ(model_kind(dir.write("junk.safetensors", "junk")), ModelKind::seq2seq);
  // A FIFO is neither waited on nor read.
  const test::Watchdog watchdog(30);
  EXPECT_EQ(model_kind(dir.fifo("f.safetensors")), ModelKind::seq2seq);
  EXPECT_EQ(model_kind(dir.fifo("f")), ModelKind::sentence_encoder);
}

TEST(ModelRegistry, AFamilyLoaderSaysWhatIsWrongWithTheFile) {
  const test::ScratchDir dir("qkv-registry");
  const std::string path = dir.write("bad.safetensors", std::string(8, '\0'));
  EXPECT_NE(error_of([&] { open_model(path); }).find(path), std::string::npos);
}

}  // namespace
}  // namespace qkv
