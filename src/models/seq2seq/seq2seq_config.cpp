// Seq2SeqConfig: its checks, and its JSON in a saved model's metadata (read back with every field
// checked, so that a corrupt file is named with its field, never blamed on qkv train's flags).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "qkv/field_error.h"
#include "qkv/json.h"
#include "qkv/model.h"

namespace qkv {
namespace {

constexpr const char* kConfigKey = "qkv.config";

nlohmann::json to_json(const Seq2SeqConfig& c) {
  return {{"architecture", std::string(to_string(c.architecture))},
          {"task", c.task},
          {"task_options",
           {{"min_length", c.task_options.min_length},
            {"max_length", c.task_options.max_length},
            {"symbols", c.task_options.symbols}}},
          {"characters", c.characters},
          {"layers", c.layers},
          {"heads", c.heads},
          {"d_model", c.d_model},
          {"ffn_hidden", c.hidden()},
          {"max_source", c.max_source},
          {"max_target", c.max_target},
          {"dropout", c.dropout},
          {"attention",
           {{"score", std::string(to_string(c.attention.score))},
            {"kv_heads", c.attention.kv_heads},
            {"tie_qk", c.attention.tie_qk},
            {"identity_v", c.attention.identity_v}}}};
}

// The metadata's configuration, every field checked for its type: errors name the file and the
// field ("m.safetensors: the metadata's qkv.config "layers" is "two"; expected an integer").
class ConfigReader {
 public:
  explicit ConfigReader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& field, const std::string& found,
                         const std::string& expected) const {
    throw Error(path_ + ": the metadata's " + kConfigKey + (field.empty() ? "" : " " + field) +
                " is " + found + "; expected " + expected);
  }
  const nlohmann::json& at(const nlohmann::json& j, const std::string& key,
                           const std::string& field, const std::string& expected) const {
    if (!j.is_object() || !j.contains(key)) fail(field, "missing", expected);
    return j.at(key);
  }
  int64_t integer(const nlohmann::json& j, const std::string& key,
                  const std::string& within = "") const {
    const std::string field = "\"" + within + key + "\"";
    const nlohmann::json& v = at(j, key, field, "an integer");
    // An integer that int64_t holds (a huge unsigned one would wrap around).
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
      fail(field, shown(v), "an integer");
    return v.get<int64_t>();
  }
  double number(const nlohmann::json& j, const std::string& key) const {
    const nlohmann::json& v = at(j, key, "\"" + key + "\"", "a number");
    if (!v.is_number()) fail("\"" + key + "\"", shown(v), "a number");
    return v.get<double>();
  }
  std::string string(const nlohmann::json& j, const std::string& key,
                     const std::string& within = "") const {
    const std::string field = "\"" + within + key + "\"";
    const nlohmann::json& v = at(j, key, field, "a string");
    if (!v.is_string()) fail(field, shown(v), "a string");
    return v.get<std::string>();
  }
  bool boolean(const nlohmann::json& j, const std::string& key, const std::string& within) const {
    const nlohmann::json& v = at(j, key, "\"" + within + key + "\"", "true or false");
    if (!v.is_boolean()) fail("\"" + within + key + "\"", shown(v), "true or false");
    return v.get<bool>();
  }
  // A value as JSON text, cut to 40 characters.
  static std::string shown(const nlohmann::json& v) {
    const std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 39) + "…" : s;
  }

 private:
  std::string path_;
};

Seq2SeqConfig from_json(const nlohmann::json& j, const std::string& path) {
  const ConfigReader r(path);
  if (!j.is_object()) r.fail("", ConfigReader::shown(j), "a JSON object");
  Seq2SeqConfig c;
  if (j.contains("architecture")) {  // files from before rnnsearch have none: transformers
    const std::string name = r.string(j, "architecture");
    const auto architecture = parse_architecture(name);
    if (!architecture)
      r.fail("\"architecture\"", ConfigReader::shown(name), "transformer or rnnsearch");
    c.architecture = *architecture;
  }
  c.task = r.string(j, "task");
  const auto& o = r.at(j, "task_options", "\"task_options\"", "an object");
  c.task_options = {.min_length = r.integer(o, "min_length", "task_options."),
                    .max_length = r.integer(o, "max_length", "task_options."),
                    .symbols = r.integer(o, "symbols", "task_options.")};
  c.characters = r.string(j, "characters");
  c.layers = r.integer(j, "layers");
  c.heads = r.integer(j, "heads");
  c.d_model = r.integer(j, "d_model");
  c.ffn_hidden = r.integer(j, "ffn_hidden");
  c.max_source = r.integer(j, "max_source");
  c.max_target = r.integer(j, "max_target");
  c.dropout = r.number(j, "dropout");
  if (j.contains("attention")) {
    const auto& a = j.at("attention");
    const std::string name = r.string(a, "score", "attention.");
    const auto score = parse_score(name);
    if (!score)
      r.fail("\"attention.score\"", ConfigReader::shown(name),
             "scaled-dot, dot, general, additive, laplace, cosine or uniform");
    c.attention.score = *score;
    c.attention.kv_heads = r.integer(a, "kv_heads", "attention.");
    c.attention.tie_qk = r.boolean(a, "tie_qk", "attention.");
    c.attention.identity_v = r.boolean(a, "identity_v", "attention.");
  }
  return c;
}

// The model's task must be one qkv knows, with options it accepts, and the model must read
// every character and length of it: `qkv explain --model` draws its default input from it.
void check_task(const Seq2SeqConfig& c, const std::string& path) {
  const ConfigReader r(path);
  const std::vector<std::string> names = task_names();
  if (std::find(names.begin(), names.end(), c.task) == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    r.fail("\"task\"", ConfigReader::shown(c.task), "one of " + list);
  }
  std::optional<Task> task;
  try {
    task = make_task(c.task, c.task_options);
  } catch (const Error& e) {
    throw Error(path + ": the metadata's " + kConfigKey + " \"task_options\": " + e.what());
  }
  for (const char ch : task->vocab().characters())
    if (c.characters.find(ch) == std::string::npos)
      r.fail("\"characters\"", ConfigReader::shown(c.characters),
             "every character of task " + c.task + " (\"" + task->vocab().characters() + "\")");
  if (c.max_source < task->max_source_length())
    r.fail("\"max_source\"", std::to_string(c.max_source),
           "at least task " + c.task + "'s " + std::to_string(task->max_source_length()));
}

}  // namespace

void Seq2SeqConfig::validate(const std::string& source) const {
  // Each value out of range names what set it: the field (a FieldError, which each front end
  // names its way: qkv train's flag, Python's argument), or the model file's metadata.
  auto bad = [&](const std::string& field, const std::string& name, const std::string& value,
                 const std::string& expected) {
    if (source.empty())
      throw FieldError(name, "{" + name + "} " + value + " is out of range; expected " + expected);
    throw Error(source + ": the metadata's " + kConfigKey + " \"" + field + "\" is " + value +
                "; expected " + expected);
  };
  auto check = [&](const std::string& field, const std::string& name, int64_t v, int64_t lo,
                   int64_t hi) {
    if (v < lo || v > hi)
      bad(field, name, std::to_string(v), std::to_string(lo) + " to " + std::to_string(hi));
  };
  check("layers", "layers", layers, 1, 64);
  check("heads", "heads", heads, 1, 256);
  check("d_model", "d_model", d_model, 1, 4096);
  if (d_model % heads != 0) {
    if (source.empty())
      throw FieldError("d_model", "{d_model} " + std::to_string(d_model) +
                                      " is not divisible by {heads} " + std::to_string(heads) +
                                      "; expected d_model = heads · d_k, e.g. {d_model} " +
                                      std::to_string((d_model / heads + 1) * heads));
    bad("d_model", "",
        std::to_string(d_model) + ", not a multiple of \"heads\" " + std::to_string(heads),
        "d_model = heads · d_k");
  }
  check("ffn_hidden", "ffn_hidden", ffn_hidden, 0, 65536);
  check("max_source", "max_source", max_source, 1, 4096);
  check("max_target", "max_target", max_target, 1, 4096);
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", dropout);
    bad("dropout", "dropout", value, "[0, 1)");
  }
  if (characters.empty() || characters.size() > 95)
    bad("characters", "characters", std::to_string(characters.size()) + " characters",
        "1 to 95 distinct printable ASCII characters");
  for (const char ch : characters)
    if (ch < 0x20 || ch > 0x7e) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned char>(ch));
      bad("characters", "characters", std::string("a string with the byte ") + code,
          "printable ASCII characters (0x20 to 0x7e)");
    }
  for (std::size_t i = 0; i < characters.size(); ++i)
    if (characters.find(characters[i], i + 1) != std::string::npos)
      bad("characters", "characters", std::string("a string with '") + characters[i] + "' twice",
          "distinct characters");
  if (architecture == Seq2SeqArchitecture::rnnsearch) {
    // One bidirectional GRU encoder, one GRU decoder, one additive attention between them.
    check("layers", "layers", layers, 1, 1);
    check("heads", "heads", heads, 1, 1);
    if (d_model % 2 != 0 || d_model < 2)
      bad("d_model", "d_model", std::to_string(d_model),
          "an even width (rnnsearch's annotations are d_model/2 a direction)");
    if (attention.score != Score::additive || attention.tie_qk || attention.identity_v ||
        attention.kv_heads > 1)
      bad("attention", "attention", "a variant",
          "rnnsearch's own: the additive score, no tie_qk, identity_v or kv_heads");
  }
  const int64_t kv = attention.kv_heads;
  if (kv < 0 || kv > heads || (kv > 0 && heads % kv != 0))
    bad("attention.kv_heads", "kv_heads", std::to_string(kv),
        "0 (= heads) or a divisor of heads " + std::to_string(heads));
  if ((attention.tie_qk || attention.identity_v) && kv != 0 && kv != heads)
    bad("attention.kv_heads", "kv_heads", std::to_string(kv),
        "0 or heads " + std::to_string(heads) + " with tie_qk or identity_v");
}

Seq2SeqConfig config_for(const Task& task, int64_t layers, int64_t heads, int64_t d_model) {
  Seq2SeqConfig c;
  c.task = task.name();
  c.characters = task.vocab().characters();
  c.layers = layers;
  c.heads = heads;
  c.d_model = d_model;
  c.max_source = task.max_source_length();
  c.max_target = task.max_target_length();
  return c;
}

Seq2SeqConfig rnnsearch_config_for(const Task& task, int64_t d_model) {
  Seq2SeqConfig c = config_for(task, 1, 1, d_model);
  c.architecture = Seq2SeqArchitecture::rnnsearch;
  c.attention.score = Score::additive;
  return c;
}

std::string config_to_metadata(const Seq2SeqConfig& config) { return to_json(config).dump(); }

Seq2SeqConfig config_from_metadata(const std::string& text, const std::string& path) {
  nlohmann::json json;
  try {
    json = parse_json(text);
  } catch (const JsonError& e) {
    throw Error(path + ": the metadata's " + std::string(kConfigKey) + " " + e.what());
  }
  const Seq2SeqConfig c = from_json(json, path);
  c.validate(path);
  check_task(c, path);
  return c;
}

}  // namespace qkv
