// `qkv experiment NAME`: train small models side by side and read the table.
#include "experiment.h"

#include <iostream>

#include "qkv/experiment.h"
#include "qkv/terminal.h"

namespace qkv::cli {

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
  std::cout << (args.json ? experiment_json(r, args.quick) + "\n" : experiment_text(r));
  return 0;
}

}  // namespace qkv::cli
