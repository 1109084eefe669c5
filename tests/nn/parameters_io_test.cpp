// nn::save_parameters / nn::load_parameters: a bit-exact round trip through safetensors, and
// loading errors that name the parameter (missing, extra, wrong shape) and change nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/safetensors.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

// A small model of both dtypes: a float32 FeedForward and a float64 LayerNorm.
struct Model : Module {
  explicit Model(uint64_t seed, int64_t hidden = 5)
      : rng(seed),
        ffn("ffn", 3, hidden, Activation::gelu, 0.0, rng),
        norm("norm", 3, 1e-5, DType::f64) {
    for (int64_t j = 0; j < 3; ++j) norm.weight.value.data<double>()[j] = rng.normal();
  }
  void collect(std::vector<Parameter*>& out) override {
    ffn.collect(out);
    norm.collect(out);
  }
  Rng rng;
  FeedForward ffn;
  LayerNorm norm;
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.dtype() == DType::f32 ? static_cast<const void*>(a.data<float>())
                                             : static_cast<const void*>(a.data<double>()),
                     b.dtype() == DType::f32 ? static_cast<const void*>(b.data<float>())
                                             : static_cast<const void*>(b.data<double>()),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

class ParametersIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("qkv-parameters-io-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // The message of the Error that load_parameters throws (Kind::runtime), "" if none.
  static std::string load_error(const std::string& file, Module& model) {
    try {
      load_parameters(file, model.parameters());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::runtime);
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(ParametersIo, RoundTripIsBitExact) {
  Model saved(1), loaded(2);
  save_parameters(path("m.safetensors"), saved.parameters(), {{"task", "copy"}, {"step", "9"}});
  const Tensor before = loaded.ffn.in.weight.value;  // shares storage: loading is in place
  const auto metadata = load_parameters(path("m.safetensors"), loaded.parameters());
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"task", "copy"}, {"step", "9"}}));
  const auto a = saved.parameters(), b = loaded.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(same_bits(a[i]->value, b[i]->value)) << a[i]->name;
  EXPECT_TRUE(same_bits(before, saved.ffn.in.weight.value));
  // Stored under the parameters' names and dtypes.
  const SafetensorsFile file = read_safetensors(path("m.safetensors"));
  EXPECT_EQ(file.names.size(), 6u);
  EXPECT_EQ(file.tensors.at("ffn.in.weight").dtype(), DType::f32);
  EXPECT_EQ(file.tensors.at("norm.weight").dtype(), DType::f64);
}

TEST_F(ParametersIo, ComparisonSeesADifferentModel) {
  Model a(1), b(2);
  EXPECT_FALSE(same_bits(a.ffn.in.weight.value, b.ffn.in.weight.value));
}

TEST_F(ParametersIo, Float32FileLoadsExactlyIntoFloat64Parameters) {
  Rng rng(3);
  Linear f32("l", 4, 2, true, rng, DType::f32), f64("l", 4, 2, true, rng, DType::f64);
  save_parameters(path("l.safetensors"), f32.parameters());
  load_parameters(path("l.safetensors"), f64.parameters());
  EXPECT_TRUE(same_bits(f64.weight.value, f32.weight.value.to(DType::f64)));
}

TEST_F(ParametersIo, LoadingErrorsNameTheParameterAndChangeNothing) {
  Model saved(1);
  save_parameters(path("m.safetensors"), saved.parameters());
  {  // the file lacks nothing but holds an extra tensor the smaller model does not have
    Rng rng(4);
    Linear small("ffn.in", 3, 5, true, rng);
    const Tensor before = small.weight.value.clone();
    try {
      load_parameters(path("m.safetensors"), small.parameters());
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::runtime);
      EXPECT_NE(std::string(e.what()).find("tensor 'ffn.out.weight' is not a parameter"),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(same_bits(small.weight.value, before)) << "a failed load changed a parameter";
  }
  {  // wrong shape
    Model wide(2, 7);
    const std::string message = load_error(path("m.safetensors"), wide);
    EXPECT_NE(
        message.find("parameter 'ffn.in.weight' has shape [5, 3] but the model expects [7, 3]"),
        std::string::npos)
        << message;
  }
  {  // missing
    save_parameters(path("part.safetensors"), saved.ffn.parameters());
    Model whole(2);
    const std::string message = load_error(path("part.safetensors"), whole);
    EXPECT_NE(message.find("parameter 'norm.weight' is missing"), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path("part.safetensors"), 0), 0u) << "starts with the file";
  }
  Model fine(2);
  EXPECT_EQ(load_error(path("m.safetensors"), fine), "");
  EXPECT_THROW(load_parameters(path("absent.safetensors"), fine.parameters()), Error);
}

// A NaN or ∞ in a saved model (a diverged run, a corrupt file) is named at load, float32 and
// float64 alike, and nothing is loaded.
TEST_F(ParametersIo, NonFiniteValuesAreNamedAndChangeNothing) {
  Model saved(1);
  saved.ffn.out.weight.value.data<float>()[6] = NAN;
  save_parameters(path("nan.safetensors"), saved.parameters());
  Model loaded(2);
  const Tensor before = loaded.ffn.out.weight.value.clone();
  EXPECT_EQ(load_error(path("nan.safetensors"), loaded),
            path("nan.safetensors") +
                ": tensor \"ffn.out.weight\" holds nan at [1, 1] of [3, 5]; expected finite "
                "weights (the file is corrupt, or saved from a model whose training diverged)");
  EXPECT_TRUE(same_bits(loaded.ffn.out.weight.value, before)) << "a failed load changed it";
  Model inf(1);
  inf.norm.bias.value.data<double>()[2] = -INFINITY;
  save_parameters(path("inf.safetensors"), inf.parameters());
  EXPECT_NE(load_error(path("inf.safetensors"), loaded).find("\"norm.bias\" holds -inf at [2]"),
            std::string::npos);
}

TEST_F(ParametersIo, SavingTwoParametersOfOneNameIsAnError) {
  Rng rng(1);
  Linear a("same", 2, 2, false, rng), b("same", 2, 2, false, rng);
  EXPECT_THROW(save_parameters(path("dup.safetensors"), {&a.weight, &b.weight}), Error);
  EXPECT_FALSE(std::filesystem::exists(path("dup.safetensors")));
}

}  // namespace
}  // namespace qkv::nn
