// What `qkv models` shows of a GGUF file, read from its header alone (qkv/model_stores.h).
#include <algorithm>
#include <map>

#include "core/gguf.h"
#include "qkv/model_stores.h"

namespace qkv {

std::string gguf_file_type_name(int64_t file_type) {
  // llama.h's enum llama_ftype; the gaps (4–6, 33–35) are types llama.cpp has retired.
  static const std::map<int64_t, const char*> names = {
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},     {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},   {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},   {21, "Q2_K_S"}, {22, "IQ3_XS"},
      {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},   {26, "IQ3_S"},  {27, "IQ3_M"},
      {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},   {31, "IQ1_M"},  {32, "BF16"},
      {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}};
  const auto it = names.find(file_type);
  return it == names.end() ? "" : it->second;
}

namespace {

// The tensor type that holds the most parameters: what a file without general.file_type is
// "mostly" (the norms are F32 in every quantization).
std::string majority_type(const std::vector<GgufTensorInfo>& tensors) {
  std::map<uint32_t, int64_t> by_type;
  for (const GgufTensorInfo& t : tensors) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    by_type[t.type] += n;
  }
  const auto most =
      std::max_element(by_type.begin(), by_type.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return most == by_type.end() ? "" : ggml_type_name(most->first);
}

}  // namespace

GgufSummary summarize_gguf(const std::string& path) {
  GgufSummary s;
  try {
    const GgufFile file = GgufFile::open(path);
    if (file.has("general.architecture") && file.meta("general.architecture").is_string())
      s.architecture = file.meta("general.architecture").get<std::string>();
    if (file.has("general.file_type") && file.meta("general.file_type").is_number_integer())
      s.quantization = gguf_file_type_name(file.meta("general.file_type").get<int64_t>());
    if (s.quantization.empty()) s.quantization = majority_type(file.tensors());
    for (const GgufTensorInfo& t : file.tensors()) {
      int64_t n = 1;
      for (const int64_t d : t.shape) n *= d;
      s.parameters += n;
    }
    const std::vector<std::string> supported = supported_gguf_architectures();
    s.runs = std::find(supported.begin(), supported.end(), s.architecture) != supported.end();
  } catch (const Error& e) {
    s = {.error = e.what()};
  }
  return s;
}

}  // namespace qkv
