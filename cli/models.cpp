#include "models.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "qkv/json.h"
#include "qkv/memory.h"
#include "qkv/model.h"
#include "qkv/model_stores.h"
#include "qkv/terminal.h"

namespace qkv::cli {

namespace {

constexpr int kWidth = 80;

// A built-in model: the short name --model takes, the model's own name, and where it lives.
struct Builtin {
  std::string name, model, kind, path, fetch;
  bool installed = false;
};

std::vector<Builtin> builtins() {
  std::vector<Builtin> out;
  for (const ModelFamily& f : model_families()) {
    std::string name, model;
    for (const std::string& n : f.names) {
      if (name.empty()) name = n;
      if (n.find('/') == std::string::npos && n.size() > model.size()) model = n;
    }
    if (name.empty()) continue;
    const bool decoder = f.kind == ModelKind::causal_lm;
    Builtin b{.name = name,
              .model = model,
              .kind = std::string(to_string(f.kind)),
              .path = decoder ? default_causal_lm_path() : default_model_dir(),
              .fetch = decoder ? "scripts/fetch_model " + name : "scripts/fetch_model"};
    std::error_code ec;
    b.installed = std::filesystem::exists(b.path, ec);
    out.push_back(std::move(b));
  }
  return out;
}

// "1.24B", "494M", "7.2K": a parameter count in three figures.
std::string count_str(int64_t n) {
  if (n <= 0) return "";
  const char* units[] = {"", "K", "M", "B", "T"};
  double x = static_cast<double>(n);
  int u = 0;
  while (x >= 999.5 && u < 4) x /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf,
                x >= 99.95 || u == 0 ? "%.0f%s"
                : x >= 9.995         ? "%.1f%s"
                                     : "%.2f%s",
                x, units[u]);
  return buf;
}

struct Row {
  StoredModel model;
  GgufSummary summary;
};

std::vector<Row> rows() {
  std::vector<Row> out;
  for (StoredModel& m : stored_models()) {
    GgufSummary s = m.error.empty() ? summarize_gguf(m.path) : GgufSummary{.error = m.error};
    out.push_back({std::move(m), std::move(s)});
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void print_builtins(const std::vector<Builtin>& list) {
  std::cout << "Built in\n";
  for (const Builtin& b : list) {
    std::cout << "  " << pad_right(b.name, 9) << " " << pad_right(b.model, 23) << " "
              << pad_right(b.kind, 17) << " " << (b.installed ? "installed" : "not installed")
              << "\n";
    if (!b.installed) std::cout << "      to fetch it: " << b.fetch << "\n";
  }
}

// One store's models: a table when its names fit the line beside the details, else each name on
// a line of its own and its details below it.
void print_store(const std::string& title, const std::vector<const Row*>& list) {
  std::cout << "\n" << title << "\n";
  if (list.empty()) {
    std::cout << "  (no GGUF files)\n";
    return;
  }
  std::vector<std::vector<std::string>> cells;
  for (const Row* r : list) {
    const GgufSummary& s = r->summary;
    cells.push_back({printable(r->model.name), printable(s.architecture), s.quantization,
                     count_str(s.parameters), bytes_str(static_cast<int64_t>(r->model.bytes)),
                     !s.error.empty() ? "no"
                     : s.runs         ? "yes"
                                      : "no"});
  }
  std::vector<std::vector<std::string>> details;
  for (const auto& c : cells) details.push_back({c.begin() + 1, c.end()});
  const std::vector<int> w = column_widths(details);
  int name_width = 0, details_width = 2 + static_cast<int>(w.size()) - 1;
  for (const auto& c : cells) name_width = std::max(name_width, display_width(c[0]));
  for (const int x : w) details_width += x;
  const bool one_line = 2 + name_width + 2 + details_width <= kWidth;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string d = table_row(details[i], w, 2, 2);
    if (one_line)
      std::cout << "  " << pad_right(cells[i][0], name_width) << "  " << d << "\n";
    else
      std::cout << "  " << cells[i][0] << "\n      " << d << "\n";
    if (!list[i]->summary.error.empty()) {
      // The row names the file: its message without the path it starts with.
      std::string error = list[i]->summary.error;
      if (error.starts_with(list[i]->model.path + ": "))
        error.erase(0, list[i]->model.path.size() + 2);
      std::cout << "      " << wrap(printable_line(error, 300), kWidth - 6, 6) << "\n";
    }
  }
}

std::string store_title(ModelStore store) {
  std::string dirs;
  for (const ModelStoreDir& d : model_store_dirs())
    if (d.store == store) {
      std::string shown = d.dir;
      const char* home = std::getenv("HOME");
      if (home != nullptr && *home != '\0' && shown.starts_with(std::string(home) + "/"))
        shown = "~" + shown.substr(std::strlen(home));
      dirs += (dirs.empty() ? "" : ", ") + printable(shown);
    }
  return std::string(to_string(store)) + " (" + dirs + ")";
}

int print_text(const std::vector<Builtin>& list, const std::vector<Row>& found) {
  print_builtins(list);
  for (const ModelStore store :
       {ModelStore::ollama, ModelStore::lm_studio, ModelStore::hugging_face}) {
    std::vector<const Row*> in;
    for (const Row& r : found)
      if (r.model.store == store) in.push_back(&r);
    print_store(store_title(store), in);
  }
  std::cout << "\n"
            << wrap(
                   "Columns: architecture, quantization, parameters, size on disk, whether qkv "
                   "runs it (GGUF architectures qkv runs: " +
                       joined(supported_gguf_architectures()) +
                       "). Pass a name to --model: qkv explain --model NAME \"a text\"",
                   kWidth, 0)
            << "\n";
  return 0;
}

int print_json(const std::vector<Builtin>& list, const std::vector<Row>& found) {
  nlohmann::json j = {{"builtin", nlohmann::json::array()},
                      {"stores", nlohmann::json::array()},
                      {"models", nlohmann::json::array()},
                      {"supported_architectures", supported_gguf_architectures()}};
  for (const Builtin& b : list)
    j["builtin"].push_back({{"name", b.name},
                            {"model", b.model},
                            {"kind", b.kind},
                            {"path", path_json(b.path)},
                            {"installed", b.installed},
                            {"fetch", b.fetch}});
  for (const ModelStoreDir& d : model_store_dirs())
    j["stores"].push_back({{"store", to_string(d.store)}, {"dir", path_json(d.dir)}});
  for (const Row& r : found) {
    const GgufSummary& s = r.summary;
    nlohmann::json m = {{"name", path_json(r.model.name)},
                        {"store", to_string(r.model.store)},
                        {"path", path_json(r.model.path)},
                        {"bytes", r.model.bytes},
                        {"runs", s.error.empty() && s.runs}};
    if (s.error.empty()) {
      m["architecture"] = path_json(s.architecture);
      m["quantization"] = s.quantization;
      m["parameters"] = s.parameters;
    } else {
      m["error"] = path_json(s.error);
    }
    j["models"].push_back(std::move(m));
  }
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace

CLI::App* add_models_command(CLI::App& app, ModelsArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "models",
      "list the models qkv can open here: the built-in ones, and the GGUF files of Ollama, LM "
      "Studio and the Hugging Face cache, by the name --model takes");
  cmd->add_flag("--json", args.json,
                "one JSON object: {builtin: [{name, model, kind, path, installed, fetch}], stores: "
                "[{store, dir}], models: [{name, store, path, bytes, runs, architecture, "
                "quantization, parameters | error}], supported_architectures}");
  cmd->footer(
      "\nEach GGUF file's header is read (its architecture, quantization and size), never its "
      "weights. Stores: $OLLAMA_MODELS or ~/.ollama/models; ~/.lmstudio/models and "
      "~/.cache/lm-studio/models; $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub.\n\n"
      "Examples:\n"
      "  qkv models\n"
      "  qkv models --json\n"
      "  qkv explain --model llama3.2:1b \"The capital of France is\"\n");
  return cmd;
}

int run_models(const ModelsArgs& args) {
  const std::vector<Builtin> list = builtins();
  const std::vector<Row> found = rows();
  return args.json ? print_json(list, found) : print_text(list, found);
}

}  // namespace qkv::cli
