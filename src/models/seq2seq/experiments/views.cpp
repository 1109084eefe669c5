// What `qkv experiment` shows of a result: text, JSON, progress (qkv/experiment.h).
#include <cmath>
#include <nlohmann/json.hpp>

#include "qkv/experiment.h"
#include "qkv/json.h"
#include "qkv/terminal.h"

namespace qkv {
namespace {

// The first column left-aligned, the others right-aligned, two spaces apart, indented three.
std::string table(const std::vector<std::string>& columns,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> all{columns};
  all.insert(all.end(), rows.begin(), rows.end());
  std::vector<int> widths = column_widths(all);
  widths.resize(columns.size());
  std::string out;
  for (auto row : all) {
    row.resize(columns.size());
    out += "   " + table_row(row, widths, 1, 2) + "\n";
  }
  return out;
}

}  // namespace

std::string experiment_progress_line(const std::string& name, const ExperimentProgress& p) {
  const double done =
      (static_cast<double>(p.run - 1) +
       static_cast<double>(p.step) / static_cast<double>(std::max<int64_t>(p.steps, 1))) /
      static_cast<double>(std::max<int64_t>(p.runs, 1));
  const double eta = done > 0 ? p.seconds * (1 - done) / done : NAN;
  return "experiment " + name + ": run " + std::to_string(p.run) + "/" + std::to_string(p.runs) +
         ", " + p.label + ", step " + std::to_string(p.step) + "/" + std::to_string(p.steps) +
         ", ETA " + duration_str(eta);
}

std::string experiment_json(const ExperimentResult& r, bool quick) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json o;
    for (std::size_t c = 0; c < r.columns.size() && c < row.size(); ++c) o[r.columns[c]] = row[c];
    rows.push_back(o);
  }
  return nlohmann::json{{"experiment", r.name}, {"question", r.question},
                        {"setup", r.setup},     {"rows", rows},
                        {"reading", r.reading}, {"seconds", number_json(r.seconds)},
                        {"quick", quick}}
      .dump();
}

std::string experiment_text(const ExperimentResult& r) {
  return "qkv experiment " + r.name + "\n\n" + wrap(r.question, 80, 0) + "\n\n" +
         wrap("Setup: " + r.setup, 80, 2) + "\n\n" + table(r.columns, r.rows) + "\n" +
         wrap_paragraphs(r.reading, 80) + "\n\n(" + fixed(r.seconds, 0) + " s)\n";
}

}  // namespace qkv
