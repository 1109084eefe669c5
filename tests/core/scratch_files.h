// tests/core/scratch_files.h — what the file-handling tests share: a scratch folder under /tmp,
// special files made in it (FIFOs, device nodes), their kind as lstat sees it, and a watchdog that
// ends a test that hangs instead of blocking the whole suite.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv::test {

// A fresh folder under the temp directory, removed with its contents afterwards.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "qkv-files") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string path(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return path(name);
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path_ / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string fifo(const std::string& name) const {
    if (::mkfifo(path(name).c_str(), 0644) != 0) throw std::runtime_error("mkfifo failed");
    return path(name);
  }
  // A character device node (1, 3 is /dev/null's; 1, 5 /dev/zero's; 1, 7 /dev/full's), made here
  // so that a bug that replaces a device with a file replaces this copy, never the system's.
  // Empty when the tests may not make device nodes (not root): the caller skips.
  std::string device(const std::string& name, unsigned major, unsigned minor) const {
    if (::mknod(path(name).c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0) return {};
    return path(name);
  }
  // The names in the folder, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> all;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      all.push_back(e.path().filename().string());
    std::sort(all.begin(), all.end());
    return all;
  }
  const std::filesystem::path& root() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The file type bits of `path` itself (lstat: a symlink is a symlink); 0 when it does not exist.
inline mode_t kind_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

// Ends the test process with a message if the scope is still running after `seconds`: a call that
// blocks forever (the bugs these tests guard against) fails the run instead of hanging it.
class Watchdog {
 public:
  explicit Watchdog(unsigned seconds) {
    struct sigaction action {};
    action.sa_handler = [](int) {
      constexpr char kMessage[] = "\nwatchdog: the test blocked; a file read or write hung\n";
      (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
      ::_exit(124);
    };
    ::sigaction(SIGALRM, &action, &previous_);
    ::alarm(seconds);
  }
  ~Watchdog() {
    ::alarm(0);
    ::sigaction(SIGALRM, &previous_, nullptr);
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct sigaction previous_ {};
};

}  // namespace qkv::test
