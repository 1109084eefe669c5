// Parsing the embedded worked examples into attention cases.
#include <nlohmann/json.hpp>
#include <string_view>

#include "qkv/attend.h"
#include "qkv/json.h"

namespace qkv::explain {

std::vector<std::string_view> embedded_examples();  // generated: build/generated/examples_data.cpp

namespace {

using nlohmann::json;

[[noreturn]] void malformed(const std::string& example, const std::string& what) {
  throw Error("built-in example '" + example + "' is malformed: " + what, Error::Kind::runtime);
}

// A JSON array of rows → a float64 [rows, columns] tensor.
Tensor matrix(const json& rows, const std::string& example, const std::string& field) {
  if (!rows.is_array() || rows.empty() || !rows[0].is_array())
    malformed(example, field + " is not a matrix");
  const int64_t r = static_cast<int64_t>(rows.size()), c = static_cast<int64_t>(rows[0].size());
  std::vector<double> values;
  for (const json& row : rows) {
    if (!row.is_array() || static_cast<int64_t>(row.size()) != c)
      malformed(example, field + " has rows of different lengths");
    for (const json& x : row) values.push_back(x.get<double>());
  }
  return Tensor::from({r, c}, values);
}

Tensor bool_matrix(const json& rows, const std::string& example) {
  const int64_t r = static_cast<int64_t>(rows.size()),
                c = r ? static_cast<int64_t>(rows[0].size()) : 0;
  Tensor t({r, c}, DType::b8);
  for (int64_t i = 0; i < r; ++i) {
    if (static_cast<int64_t>(rows[i].size()) != c) malformed(example, "mask rows differ in length");
    for (int64_t j = 0; j < c; ++j) t.at<bool>(i, j) = rows[i][j].get<bool>();
  }
  return t;
}

// x · w for float64 [n, a] and [a, b] matrices.
Tensor matmul(const Tensor& x, const Tensor& w, const std::string& example) {
  if (x.dim(1) != w.dim(0)) malformed(example, "a projection's sizes do not match");
  Tensor y({x.dim(0), w.dim(1)}, DType::f64);
  for (int64_t i = 0; i < x.dim(0); ++i)
    for (int64_t j = 0; j < w.dim(1); ++j)
      for (int64_t t = 0; t < x.dim(1); ++t)
        y.at<double>(i, j) += x.at<double>(i, t) * w.at<double>(t, j);
  return y;
}

// Q, K and V of one run: given directly, or as inputs times projection matrices.
void read_qkv(const json& run, const std::string& example, AttentionCall& c) {
  if (run.contains("q")) {
    c.q = matrix(run.at("q"), example, "q");
    c.k = matrix(run.at("k"), example, "k");
    c.v = matrix(run.at("v"), example, "v");
    return;
  }
  const Tensor x_q = matrix(run.at("x_q"), example, "x_q");
  const Tensor x_k = matrix(run.at("x_k"), example, "x_k");
  const Tensor x_v = run.contains("x_v") ? matrix(run.at("x_v"), example, "x_v") : x_k;
  auto project = [&](const Tensor& x, const char* w_field, const char* result, const char* input,
                     const char* weight) {
    if (!run.contains(w_field)) return x;
    const Tensor w = matrix(run.at(w_field), example, w_field);
    c.projections.push_back({result, input, weight, x, w});
    return matmul(x, w, example);
  };
  c.q = project(x_q, "w_q", "Q", "X_q", "W_Q");
  c.k = project(x_k, "w_k", "K", "X_k", "W_K");
  c.v = project(x_v, "w_v", "V", "X_v", "W_V");
}

Example parse(std::string_view text) {
  const json j = parse_json(text);
  Example e;
  e.name = j.at("name").get<std::string>();
  e.title = j.at("title").get<std::string>();
  e.story = j.at("story").get<std::vector<std::string>>();
  e.takeaway = j.value("takeaway", "");
  for (const json& run : j.at("runs")) {
    AttentionCall c;
    c.caption = run.value("caption", "");
    c.query_labels = j.at("query_labels").get<std::vector<std::string>>();
    c.key_labels = j.at("key_labels").get<std::vector<std::string>>();
    c.value_columns = j.value("value_columns", std::vector<std::string>{});
    c.input_columns = j.value("input_columns", std::vector<std::string>{});
    const auto score = parse_score(run.at("score").get<std::string>());
    if (!score) malformed(e.name, "unknown score " + run.at("score").dump());
    c.options.score = *score;
    if (run.contains("scale")) c.options.scale = run.at("scale").get<double>();
    if (run.contains("normalize")) {
      const auto normalize = parse_normalize(run.at("normalize").get<std::string>());
      if (!normalize) malformed(e.name, "unknown normalize " + run.at("normalize").dump());
      c.options.normalize = *normalize;
    }
    if (run.contains("causal")) {
      const auto causal = parse_causal(run.at("causal").get<std::string>());
      if (!causal) malformed(e.name, "unknown causal " + run.at("causal").dump());
      c.options.causal = *causal;
    }
    if (run.contains("mask")) c.options.mask = bool_matrix(run.at("mask"), e.name);
    if (run.contains("params")) {
      const json& p = run.at("params");
      if (p.contains("w")) c.options.params.w = matrix(p.at("w"), e.name, "params.w");
      if (p.contains("w_q")) c.options.params.w_q = matrix(p.at("w_q"), e.name, "params.w_q");
      if (p.contains("w_k")) c.options.params.w_k = matrix(p.at("w_k"), e.name, "params.w_k");
      if (p.contains("v"))
        c.options.params.v = Tensor::from({static_cast<int64_t>(p.at("v").size())},
                                          p.at("v").get<std::vector<double>>());
    }
    read_qkv(run, e.name, c);
    e.runs.push_back(std::move(c));
  }
  return e;
}

}  // namespace

const std::vector<Example>& examples() {
  static const std::vector<Example> all = [] {
    std::vector<Example> out;
    for (std::string_view text : embedded_examples()) {
      try {
        out.push_back(parse(text));
      } catch (const json::exception& e) {
        throw Error(std::string("a built-in example is malformed: ") + e.what(),
                    Error::Kind::runtime);
      } catch (const JsonError& e) {
        throw Error(std::string("a built-in example ") + e.what(), Error::Kind::runtime);
      }
    }
    return out;
  }();
  return all;
}

const Example& find_example(const std::string& name) {
  std::string names;
  for (const Example& e : examples()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw FieldError("example", "{example} '" + FieldError::literal(name) +
                                  "' is not a built-in example; expected one of: " + names);
}

}  // namespace qkv::explain
