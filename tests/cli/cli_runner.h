// tests/cli/cli_runner.h — runs the built `qkv` command and captures what it did.
//
// The child's stdout and stderr go to two temporary files (not pipes, so a chatty child can never
// block on a full pipe while we wait for it); stdin is /dev/null unless given. posix_spawn, not
// system(): the arguments reach the program exactly as given, with no shell quoting in between.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace qkv::testing {

struct CliResult {
  int exit_code = -1;      // the status passed to exit(); 128 + N when killed by signal N
  std::string out;         // everything written to stdout
  std::string err;         // everything written to stderr
  std::string command;     // the command line, for failure messages
  bool timed_out = false;  // killed after RunOptions::timeout_s

  // "qkv attend ... → exit 2\nstdout: ...\nstderr: ..." for a failing assertion.
  std::string describe() const {
    return command + "\n  → exit " + std::to_string(exit_code) + "\n  stdout: " + out +
           "\n  stderr: " + err;
  }
};

namespace detail {

// An unlinked temporary file; the returned descriptor is the only way to it.
inline int anonymous_temp_file() {
  char name[] = "/tmp/qkv-cli-XXXXXX";
  int fd = ::mkstemp(name);
  if (fd < 0) throw std::runtime_error(std::string("mkstemp: ") + std::strerror(errno));
  ::unlink(name);
  return fd;
}

inline std::string read_all(int fd) {
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  return text;
}

}  // namespace detail

// How to run the child beyond its arguments.
struct RunOptions {
  std::string input;       // its stdin (if not empty)
  std::string stdin_path;  // else a file to open as its stdin (if not empty), else /dev/null
  // Seconds before the child is killed (SIGKILL) and the run reported as timed out; 0: no limit.
  // A test of something that once hung sets one, so that the bug coming back fails the test
  // rather than blocking the suite.
  int timeout_s = 0;
  std::vector<std::string> env;  // "NAME=value" entries added to the child's environment
};

namespace detail {

// Waits for `pid`; after `timeout_s` seconds (0: never) kills it. Returns the wait status.
inline int wait_for(pid_t pid, int timeout_s, bool& timed_out) {
  int status = 0;
  timed_out = false;
  if (timeout_s <= 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  const timespec step{0, 10'000'000};  // 10 ms
  for (long waited_ms = 0;; waited_ms += 10) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return status;
    if (waited_ms >= timeout_s * 1000L) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return status;
    }
    ::nanosleep(&step, nullptr);
  }
}

// The parent's environment with `extra` ("NAME=value") added, for posix_spawn.
inline std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env(extra);
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace detail

// Runs `binary args...` and waits for it, as `options` say.
inline CliResult run_program(const std::string& binary, const std::vector<std::string>& args,
                             const RunOptions& options) {
  CliResult result;
  result.command = binary;
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
    result.command += " " + arg;
  }
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = detail::environment_with(options.env);
  std::vector<char*> env;
  for (const std::string& e : env_strings) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  const int out_fd = detail::anonymous_temp_file();
  const int err_fd = detail::anonymous_temp_file();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int in_fd = -1;
  if (!options.input.empty()) {
    in_fd = detail::anonymous_temp_file();
    const std::string& input = options.input;
    if (::write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size()))
      throw std::runtime_error("cannot write the child's stdin");
    ::lseek(in_fd, 0, SEEK_SET);
    posix_spawn_file_actions_adddup2(&actions, in_fd, STDIN_FILENO);
  } else {
    const std::string& path = options.stdin_path.empty() ? "/dev/null" : options.stdin_path;
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, path.c_str(), O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  pid_t pid = 0;
  const int spawn_error =
      posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (in_fd >= 0) ::close(in_fd);
  if (spawn_error != 0) {
    ::close(out_fd);
    ::close(err_fd);
    throw std::runtime_error("cannot start " + binary + ": " + std::strerror(spawn_error));
  }
  const int status = detail::wait_for(pid, options.timeout_s, result.timed_out);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  if (result.timed_out)
    result.command += "  [killed after " + std::to_string(options.timeout_s) + " s]";
  result.out = detail::read_all(out_fd);
  result.err = detail::read_all(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  return result;
}

// Runs `binary args...` and waits for it; `input` (if not empty) is its stdin, else /dev/null.
inline CliResult run_program(const std::string& binary, const std::vector<std::string>& args,
                             const std::string& input = {}) {
  return run_program(binary, args, RunOptions{.input = input});
}

#ifdef QKV_BINARY
// The `qkv` built with these tests, or the one $QKV_TEST_BINARY names (to run the tests against
// another build, e.g. an older one, and see which fail there).
inline std::string qkv_binary() {
  const char* other = std::getenv("QKV_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : QKV_BINARY;
}
// Runs the `qkv` built with these tests.
inline CliResult run_qkv(const std::vector<std::string>& args, const std::string& input = {}) {
  return run_program(qkv_binary(), args, input);
}
inline CliResult run_qkv(const std::vector<std::string>& args, const RunOptions& options) {
  return run_program(qkv_binary(), args, options);
}
#endif

}  // namespace qkv::testing
