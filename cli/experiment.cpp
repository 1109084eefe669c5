// `qkv experiment NAME`: train small models side by side and read the table.
#include "experiment.h"

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "progress.h"
#include "qkv/json.h"
#include "qkv/train.h"
#include "text.h"

namespace qkv::cli {
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

// "experiment heads: run 3/8, 4 head(s) (seed 1), step 400/1000, ETA 1m20s". The ETA assumes
// the runs left take as long a step as the ones done (the widths and scores differ, so it is
// rough).
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

}  // namespace
CLI::App* add_experiment_command(CLI::App& app, ExperimentArgs& args) {
  std::string names;
  for (const std::string& n : experiment_names()) names += (names.empty() ? "" : ", ") + n;
  CLI::App* cmd = app.add_subcommand(
      "experiment", "answer a design question by measurement: train small models side by side");
  cmd->add_option("name", args.name, "the experiment: " + names)->required();
  cmd->add_flag("--quick", args.quick,
                "shorter sequences, fewer steps and variants (a few minutes); it reads the same "
                "direction as the full run, and '·' marks what it left untrained");
  cmd->add_flag("--json", args.json, "print the table and the reading as JSON");
  cmd->footer(
      "\nExperiments:\n"
      "  tie-qk   W_Q = W_K (a symmetric QKᵀ) against separate projections, on reverse\n"
      "           and on follow (a previous-token relation); worked by hand in\n"
      "           qkv attend --example tied\n"
      "  no-wv    identity W_V and no W_O against learned ones\n"
      "  scale    softmax(QKᵀ/√d_k) against softmax(QKᵀ) as d_k grows\n"
      "  heads    1, 2, 4, 8 heads at the same d_model\n"
      "  scores   scaled-dot, additive, general, laplace, cosine on one task\n\n"
      "Examples:\n"
      "  qkv experiment scale --quick\n"
      "  qkv experiment tie-qk --json\n");
  return cmd;
}

int run_experiment_command(const ExperimentArgs& args) {
  // On a terminal one line rewritten in place every few steps; otherwise (a log, a pipe) a line
  // as each training run starts. Both name the run, its step and the experiment's ETA.
  Progress progress;
  ExperimentOptions options{.quick = args.quick};
  options.step_progress = [&](const ExperimentProgress& p) {
    if (p.step != 1 && !(progress.terminal() && p.step % 10 == 0)) return;
    progress.show(experiment_progress_line(args.name, p));
    if (!progress.terminal()) std::cerr << experiment_progress_line(args.name, p) << "\n";
  };
  const ExperimentResult r = run_experiment(args.name, options);
  progress.clear();
  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.rows) {
      nlohmann::json o;
      for (std::size_t c = 0; c < r.columns.size() && c < row.size(); ++c) o[r.columns[c]] = row[c];
      rows.push_back(o);
    }
    std::cout << nlohmann::json{{"experiment", r.name}, {"question", r.question},
                                {"setup", r.setup},     {"rows", rows},
                                {"reading", r.reading}, {"seconds", number_json(r.seconds)},
                                {"quick", args.quick}}
                     .dump()
              << "\n";
    return 0;
  }
  std::cout << "qkv experiment " << r.name << "\n\n"
            << wrap(r.question, 80, 0) << "\n\n"
            << wrap("Setup: " + r.setup, 80, 2) << "\n\n"
            << table(r.columns, r.rows) << "\n"
            << wrap_paragraphs(r.reading, 80) << "\n\n"
            << "(" << fixed(r.seconds, 0) << " s)\n";
  return 0;
}

}  // namespace qkv::cli
