// `qkv experiment NAME`: design questions about attention, answered by measurement.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace qkv::cli {

struct ExperimentArgs {
  std::string name;
  bool quick = false;
  bool json = false;
};

CLI::App* add_experiment_command(CLI::App& app, ExperimentArgs& args);
int run_experiment_command(const ExperimentArgs& args);

}  // namespace qkv::cli
