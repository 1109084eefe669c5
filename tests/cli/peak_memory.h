// The peak resident memory of a `qkv` command, for the tests that hold an estimate to what a
// command really takes, or a command to taking little.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace qkv::testing {

// `qkv args` run through a small intermediary that reports the child's peak resident memory
// (wait4's ru_maxrss): a child this test process spawned itself would begin at the test process's
// own high-water mark (ru_maxrss counts it), which the large outputs other tests read raise;
// Python's RUSAGE_CHILDREN of its one child starts from Python's few MiB. The child's stdout is
// discarded; `result` has its exit code and stderr.
struct MeasuredRun {
  CliResult result;
  long peak_kib = 0;  // 0 where /usr/bin/python3 is missing
};

inline MeasuredRun run_qkv_measured(const std::vector<std::string>& args,
                                    const RunOptions& options = {}) {
  MeasuredRun m;
  if (!std::filesystem::exists("/usr/bin/python3")) {
    m.result = run_qkv(args, options);
    return m;
  }
  std::vector<std::string> argv = {"-c",
                                   "import resource, subprocess, sys\n"
                                   "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
                                   "sys.stderr.write('peak_kib %d\\n' % "
                                   "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
                                   "sys.exit(r.returncode if r.returncode >= 0 else "
                                   "128 - r.returncode)\n",
                                   qkv_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  m.result = run_program("/usr/bin/python3", argv, options);
  const std::size_t at = m.result.err.rfind("peak_kib ");
  if (at != std::string::npos) {
    m.peak_kib = std::stol(m.result.err.substr(at + 9));
    m.result.err.erase(at);
  }
  return m;
}

}  // namespace qkv::testing
