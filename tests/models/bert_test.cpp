// The BERT encoder against Hugging Face transformers (tests/golden/minilm, made by
// tests/golden/make_minilm_goldens.py): hidden states, attention weights and sentence embeddings
// of all-MiniLM-L6-v2, on the token ids of the golden tokenizer (the tokenizer has its own test).
#include "models/bert/bert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/safetensors.h"
#include "models/minilm.h"
#include "models/model_files.h"
#include "nn/compare.h"
#include "qkv/npy.h"
#include "simd_targets.h"

namespace qkv {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using test::Minilm;
using test::minilm;

std::vector<int32_t> golden_ids(int text) {
  return test::read_golden_json("tokens.json")[text]["ids"].get<std::vector<int32_t>>();
}

using test::max_abs_diff;  // +∞ when the shapes differ

TEST(BertConfigTest, ReadsMiniLM) {
  const BertConfig& c = minilm().config;
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
}

// Every layer's hidden states and attention weights of the golden texts, fast path (fp32) and
// the capture run (float64 attention), within 1e-5 of transformers' float64 run.
TEST(BertEncodeTest, MatchesTransformersLayerByLayer) {
  const Minilm& m = minilm();
  for (int text : test::read_golden_json("attention_texts.json").get<std::vector<int>>()) {
    SCOPED_TRACE("golden text " + std::to_string(text));
    const std::string base = test::golden_dir() + "/";
    const Tensor hidden = read_npy(base + "hidden_" + std::to_string(text) + ".npy");
    const Tensor attentions = read_npy(base + "attentions_" + std::to_string(text) + ".npy");
    const std::vector<int32_t> ids = golden_ids(text);
    const int64_t L = static_cast<int64_t>(ids.size());

    const Tensor last = bert_encode(m.weights, m.config, {ids});
    EXPECT_LE(max_abs_diff(last.reshape({L, 384}), hidden.narrow(0, 6, 1).reshape({L, 384})), 1e-5);

    BertCapture capture;
    bert_encode(m.weights, m.config, {ids}, {.capture = &capture});
    ASSERT_EQ(capture.layers.size(), 6u);
    EXPECT_LE(max_abs_diff(capture.embeddings.reshape({L, 384}),
                           hidden.narrow(0, 0, 1).reshape({L, 384})),
              1e-5);
    for (int l = 0; l < 6; ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const AttentionCapture& c = capture.layers[static_cast<std::size_t>(l)];
      const Tensor& c_hidden = capture.hidden[static_cast<std::size_t>(l)];
      EXPECT_LE(max_abs_diff(c.weights.reshape({12, L, L}),
                             attentions.narrow(0, l, 1).reshape({12, L, L})),
                1e-5);
      EXPECT_LE(
          max_abs_diff(c_hidden.reshape({L, 384}), hidden.narrow(0, l + 1, 1).reshape({L, 384})),
          1e-5);
    }
  }
}

std::vector<std::vector<int32_t>> all_golden_ids() {
  std::vector<std::vector<int32_t>> ids;
  for (const auto& t : test::read_golden_json("tokens.json"))
    ids.push_back(t["ids"].get<std::vector<int32_t>>());
  return ids;
}

std::vector<int64_t> lengths_of(const std::vector<std::vector<int32_t>>& ids) {
  std::vector<int64_t> lengths;
  for (const auto& seq : ids) lengths.push_back(static_cast<int64_t>(seq.size()));
  return lengths;
}

QKV_PER_SIMD_TARGET(BertEmbedTest);

// Every golden text, batched with padding (13 at a time, so batches mix lengths 2 to 256):
// cosine ≥ 0.99999 and max |diff| ≤ 1e-5 against transformers' float64 embeddings.
TEST_P(BertEmbedTest, PaddedBatchesMatchTransformersForEveryText) {
  const Minilm& m = minilm();
  const std::vector<std::vector<int32_t>> ids = all_golden_ids();
  const Tensor golden = read_npy(test::golden_dir() + "/embeddings_f64.npy");
  ASSERT_EQ(golden.dim(0), static_cast<int64_t>(ids.size()));
  double worst_diff = 0, worst_cos = 1;
  for (std::size_t begin = 0; begin < ids.size(); begin += 13) {
    const std::vector<std::vector<int32_t>> batch(
        ids.begin() + static_cast<std::ptrdiff_t>(begin),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), begin + 13)));
    const Tensor e =
        mean_pool_normalize(bert_encode(m.weights, m.config, batch), lengths_of(batch));
    for (int64_t b = 0; b < e.dim(0); ++b) {
      const int64_t text = static_cast<int64_t>(begin) + b;
      double dot = 0, diff = 0;
      for (int64_t j = 0; j < 384; ++j) {
        const double x = e.at<float>(b, j), y = golden.at<double>(text, j);
        dot += x * y;  // both unit length
        diff = std::max(diff, std::abs(x - y));
      }
      EXPECT_GE(dot, 0.99999) << "text " << text;
      EXPECT_LE(diff, 1e-5) << "text " << text;
      worst_diff = std::max(worst_diff, diff);
      worst_cos = std::min(worst_cos, dot);
    }
  }
  RecordProperty("worst_max_abs_diff", ::testing::PrintToString(worst_diff));
  RecordProperty("worst_one_minus_cosine", ::testing::PrintToString(1 - worst_cos));
}

// The public reference values of sentence-transformers/all-MiniLM-L6-v2.
TEST_P(BertEmbedTest, PublicReferenceValues) {
  const Minilm& m = minilm();
  const std::vector<int32_t> ids = {101, 2023, 2003, 2019, 2742, 6251, 102};
  const Tensor e = mean_pool_normalize(bert_encode(m.weights, m.config, {ids}), {7});
  EXPECT_NEAR(e.at<float>(0, 0), 0.06765693, 2e-7);
  EXPECT_NEAR(e.at<float>(0, 1), 0.06349593, 2e-7);
  EXPECT_NEAR(e.at<float>(0, 2), 0.04871314, 2e-7);
}

// The whole encoder in float64 (weights converted; the reference attention) agrees with
// transformers' float64 run to float64 accuracy; the float32 fast path is checked above.
TEST_P(BertEmbedTest, Float64ReferenceRunMatchesTransformersFloat64) {
  const Minilm& m = minilm();
  const BertWeights w64 = to(m.weights, DType::f64);
  const Tensor golden = read_npy(test::golden_dir() + "/embeddings_f64.npy");
  for (int text : {0, 1, 3, 15}) {
    const std::vector<int32_t> ids = golden_ids(text);
    const Tensor e =
        mean_pool_normalize(bert_encode(w64, m.config, {ids}, {.attention_path = Path::reference}),
                            {static_cast<int64_t>(ids.size())});
    ASSERT_EQ(e.dtype(), DType::f64);
    double diff = 0;
    for (int64_t j = 0; j < 384; ++j)
      diff = std::max(diff, std::abs(e.at<double>(0, j) - golden.at<double>(text, j)));
    EXPECT_LE(diff, 1e-12) << "text " << text;
  }
}

TEST(BertEncodeTest, RejectsIdsOutsideTheVocabularyAndOverlongSequences) {
  const Minilm& m = minilm();
  EXPECT_THAT(
      [&] {
        bert_encode(m.weights, m.config, {{101, 30522, 102}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("token id 30522 is outside")));
  EXPECT_THAT([&] { bert_encode(m.weights, m.config, {std::vector<int32_t>(513, 1000)}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("exceeds the model's 512 positions")));
}

// ---- loading: a tiny BERT (hidden 4, 2 heads, 1 layer) written with our safetensors writer ----

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 10;
  c.hidden_size = 4;
  c.num_layers = 1;
  c.num_heads = 2;
  c.intermediate_size = 8;
  c.max_positions = 16;
  c.type_vocab_size = 2;
  return c;
}

std::vector<std::pair<std::string, Tensor>> tiny_tensors(const std::string& prefix = "") {
  std::vector<std::pair<std::string, Tensor>> t;
  auto add = [&](const std::string& name, Shape shape) {
    t.emplace_back(prefix + name, Tensor::full(std::move(shape), 0.1));
  };
  add("embeddings.word_embeddings.weight", {10, 4});
  add("embeddings.position_embeddings.weight", {16, 4});
  add("embeddings.token_type_embeddings.weight", {2, 4});
  add("embeddings.LayerNorm.weight", {4});
  add("embeddings.LayerNorm.bias", {4});
  const std::string l = "encoder.layer.0.";
  for (const char* m : {"query", "key", "value"}) {
    add(l + "attention.self." + m + ".weight", {4, 4});
    add(l + "attention.self." + m + ".bias", {4});
  }
  add(l + "attention.output.dense.weight", {4, 4});
  add(l + "attention.output.dense.bias", {4});
  add(l + "attention.output.LayerNorm.weight", {4});
  add(l + "attention.output.LayerNorm.bias", {4});
  add(l + "intermediate.dense.weight", {8, 4});
  add(l + "intermediate.dense.bias", {8});
  add(l + "output.dense.weight", {4, 8});
  add(l + "output.dense.bias", {4});
  add(l + "output.LayerNorm.weight", {4});
  add(l + "output.LayerNorm.bias", {4});
  add("pooler.dense.weight", {4, 4});  // unused by the encoder, allowed
  return t;
}

// A file of this process's own (ctest runs tests in parallel, and other checkouts may too).
std::string tiny_bert_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("qkv-tiny-bert-" + std::to_string(::getpid()) + "-" + name + ".safetensors"))
      .string();
}

std::string load_error(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const std::string path = tiny_bert_path("weights");
  write_safetensors(path, tensors);
  std::string error;
  try {
    read_bert_weights(path, tiny_config());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    error = e.what();
  }
  std::filesystem::remove(path);
  return error;
}

TEST(BertWeightsTest, LoadsACompleteCheckpointWithOrWithoutThePrefix) {
  EXPECT_EQ(load_error(tiny_tensors()), "");
  EXPECT_EQ(load_error(tiny_tensors("bert.")), "");
}

TEST(BertWeightsTest, MissingExtraAndMisshapenTensorsAreNamed) {
  auto missing = tiny_tensors();
  missing.erase(missing.begin() + 6);  // encoder.layer.0.attention.self.query.bias
  EXPECT_THAT(load_error(missing),
              HasSubstr("\"encoder.layer.0.attention.self.query.bias\" is missing"));
  auto extra = tiny_tensors();
  extra.emplace_back("encoder.layer.1.output.dense.bias", Tensor({4}));
  EXPECT_THAT(load_error(extra), HasSubstr("\"encoder.layer.1.output.dense.bias\" is not part of"));
  auto wrong = tiny_tensors();
  wrong[11].second = Tensor({4, 5});  // attention.output.dense.weight
  EXPECT_THAT(load_error(wrong),
              AllOf(HasSubstr("attention.output.dense.weight\" has shape [4, 5]"),
                    HasSubstr("expected [4, 4]")));
}

TEST(BertConfigTest, BadConfigsAreNamed) {
  const std::string path = (std::filesystem::temp_directory_path() / "qkv-config.json").string();
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(path) << text;
    try {
      read_bert_config(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of(R"({"hidden_act": "relu"})"),
              HasSubstr("\"hidden_act\" is \"relu\"; expected \"gelu\""));
  EXPECT_THAT(error_of(R"({"vocab_size": 10})"), HasSubstr("\"hidden_size\" is missing"));
  EXPECT_THAT(error_of(R"({"vocab_size": 10, "hidden_size": 5, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 16,
      "type_vocab_size": 2})"),
              HasSubstr("not a multiple"));
}

// Every number config.json holds is checked: one line naming the file, the field, the value found
// and what was expected. A zero, negative or NaN-making layer_norm_eps used to load and make every
// output NaN.
TEST(BertConfigTest, EveryFieldIsCheckedWithItsValueAndRange) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "qkv-config-fields.json").string();
  auto error_of = [&](const std::string& field, const std::string& value) -> std::string {
    std::ifstream in(test::minilm_file("config.json"));
    nlohmann::json j = nlohmann::json::parse(in);
    if (value == "<missing>")
      j.erase(field);
    else
      j[field] = nlohmann::json::parse(value);
    std::ofstream(path) << j.dump();
    try {
      read_bert_config(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::runtime);
      return e.what();
    }
    return "";
  };
  const std::string eps = "; expected a small positive number (0 < eps ≤ 0.01), e.g. 1e-12";
  EXPECT_EQ(error_of("layer_norm_eps", "-1e-12"), path + ": \"layer_norm_eps\" is -1e-12" + eps);
  EXPECT_EQ(error_of("layer_norm_eps", "0"), path + ": \"layer_norm_eps\" is 0" + eps);
  EXPECT_EQ(error_of("layer_norm_eps", "0.5"), path + ": \"layer_norm_eps\" is 0.5" + eps);
  EXPECT_EQ(error_of("layer_norm_eps", "\"1e-12\""),
            path + ": \"layer_norm_eps\" is \"1e-12\"" + eps);
  // JSON has no NaN; a literal that overflows to ∞ is refused by the parser.
  std::ofstream(path) << R"({"layer_norm_eps": 1e999})";
  EXPECT_THAT([&] { read_bert_config(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not valid JSON")));
  EXPECT_EQ(error_of("num_hidden_layers", "0"),
            path + ": \"num_hidden_layers\" is 0; expected an integer from 1 to 1000");
  EXPECT_EQ(error_of("hidden_size", "-384"),
            path + ": \"hidden_size\" is -384; expected an integer from 1 to 65536");
  EXPECT_EQ(error_of("vocab_size", "30522.5"),
            path + ": \"vocab_size\" is 30522.5; expected an integer from 1 to 10000000");
  EXPECT_EQ(error_of("vocab_size", "18446744073709551615"),
            path +
                ": \"vocab_size\" is 18446744073709551615; expected an integer from 1 to "
                "10000000");
  EXPECT_EQ(error_of("max_position_embeddings", "1"),
            path + ": \"max_position_embeddings\" is 1; expected an integer from 2 to 1048576");
  EXPECT_EQ(error_of("num_attention_heads", "500"),
            path + ": \"num_attention_heads\" is 500; expected an integer from 1 to 384");
  EXPECT_EQ(error_of("num_attention_heads", "7"),
            path +
                ": \"hidden_size\" 384 is not a multiple of \"num_attention_heads\" 7; "
                "expected hidden_size = heads · head dim");
  EXPECT_EQ(error_of("type_vocab_size", "<missing>"),
            path + ": \"type_vocab_size\" is missing; expected an integer from 1 to 1024");
  EXPECT_EQ(error_of("hidden_dropout_prob", "2"),
            path + ": \"hidden_dropout_prob\" is 2; expected a probability from 0 to 1");
  EXPECT_EQ(error_of("hidden_act", "\"gelu_new\""),
            path +
                ": \"hidden_act\" is \"gelu_new\"; expected \"gelu\" (the erf form; the "
                "only one supported)");
  EXPECT_EQ(error_of("layer_norm_eps", "1e-5"), "");       // other BERTs' value
  EXPECT_EQ(error_of("layer_norm_eps", "<missing>"), "");  // transformers' default, 1e-12
}

// A NaN or ∞ anywhere in the weights is found at load time and named, with where it is.
TEST(BertWeightsTest, NonFiniteWeightsAreNamedWithTheirPlace) {
  auto with = [](const std::string& name, int64_t index, double value) {
    auto tensors = tiny_tensors();
    for (auto& [n, t] : tensors)
      if (n == name) t.data<float>()[index] = static_cast<float>(value);
    return tensors;
  };
  EXPECT_EQ(load_error(with("encoder.layer.0.attention.self.key.weight", 6, NAN)),
            tiny_bert_path("weights") +
                ": tensor \"encoder.layer.0.attention.self.key.weight\" holds nan at [1, 2] of "
                "[4, 4]; expected finite weights (the file is corrupt, or saved from a model "
                "whose training diverged)");
  EXPECT_THAT(load_error(with("embeddings.LayerNorm.bias", 3, -INFINITY)),
              HasSubstr("\"embeddings.LayerNorm.bias\" holds -inf at [3] of [4]"));
  EXPECT_THAT(load_error(with("encoder.layer.0.output.dense.weight", 31, INFINITY)),
              HasSubstr("\"encoder.layer.0.output.dense.weight\" holds inf at [3, 7] of [4, 8]"));
  // The largest float is finite: it loads (what it computes is checked where it is shown).
  EXPECT_EQ(load_error(with("encoder.layer.0.output.dense.weight", 0, 3.4e38)), "");
}

// The embeddings' shapes follow three fields of config.json: a mismatch names them.
TEST(BertWeightsTest, EmbeddingShapeMismatchNamesTheConfigField) {
  const std::string path = tiny_bert_path("vocab");
  write_safetensors(path, tiny_tensors());
  BertConfig c = tiny_config();
  c.vocab_size = 12;
  EXPECT_THAT([&] { read_bert_weights(path, c); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "\"embeddings.word_embeddings.weight\" has shape [10, 4]; expected [12, 4] for "
                  "this config (config.json: vocab_size 12, hidden_size 4)")));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qkv
