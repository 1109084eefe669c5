// tests/cli/cli_runner.h — runs the built `qkv` command and captures what it did.
//
// The child's stdout and stderr go to two temporary files (not pipes, so a chatty child can never
// block on a full pipe while we wait for it); stdin is /dev/null. posix_spawn, not system(): the
// arguments reach the program exactly as given, with no shell quoting in between.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
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
  int exit_code = -1;   // the status passed to exit(); 128 + N when killed by signal N
  std::string out;      // everything written to stdout
  std::string err;      // everything written to stderr
  std::string command;  // the command line, for failure messages

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

// Runs `binary args...` and waits for it; `input` (if not empty) is its stdin, else /dev/null.
inline CliResult run_program(const std::string& binary, const std::vector<std::string>& args,
                             const std::string& input = {}) {
  CliResult result;
  result.command = binary;
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
    result.command += " " + arg;
  }
  argv.push_back(nullptr);

  const int out_fd = detail::anonymous_temp_file();
  const int err_fd = detail::anonymous_temp_file();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int in_fd = -1;
  if (input.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  } else {
    in_fd = detail::anonymous_temp_file();
    if (::write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size()))
      throw std::runtime_error("cannot write the child's stdin");
    ::lseek(in_fd, 0, SEEK_SET);
    posix_spawn_file_actions_adddup2(&actions, in_fd, STDIN_FILENO);
  }
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  pid_t pid = 0;
  const int spawn_error =
      posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (in_fd >= 0) ::close(in_fd);
  if (spawn_error != 0) {
    ::close(out_fd);
    ::close(err_fd);
    throw std::runtime_error("cannot start " + binary + ": " + std::strerror(spawn_error));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  result.out = detail::read_all(out_fd);
  result.err = detail::read_all(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  return result;
}

#ifdef QKV_BINARY
// Runs the `qkv` built with these tests, or the one $QKV_TEST_BINARY names: the CLI tests can run
// against another build, e.g. the one before a fix, to see them fail there.
inline CliResult run_qkv(const std::vector<std::string>& args, const std::string& input = {}) {
  const char* other = std::getenv("QKV_TEST_BINARY");
  return run_program(other != nullptr && *other != '\0' ? other : QKV_BINARY, args, input);
}
#endif

}  // namespace qkv::testing
