// Atomic writes of a set of files: temporaries first, renames last.
#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "qkv/tensor.h"

namespace qkv {
namespace {

// errno is taken as an argument, read before anything could clobber it.
[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw Error(path + ": cannot " + what + ": " + std::strerror(err), Error::Kind::runtime);
}

// Writes bytes to a fresh temporary file beside `path`, synced to disk, and returns its name.
// Created with O_EXCL and mode 0666 so the umask applies as to a plain open() (mkstemp would make
// the result readable by its owner only).
std::string write_temporary(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string name;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    const auto salt =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter++ << 20) ^ static_cast<uint64_t>(::getpid());
    name = path + ".tmp." + std::to_string(salt % 1000000007);
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) fail(path, "write", errno);
  }
  if (fd < 0) fail(path, "write", EEXIST);

  auto abandon = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(name.c_str());
    fail(path, what, err);
  };
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) abandon("write", errno);
    done += static_cast<std::size_t>(n);
  }
  // fsync before rename: otherwise a crash can leave the file renamed but empty.
  if (::fsync(fd) != 0) abandon("sync", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("close", errno);
  return name;
}

}  // namespace

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temporaries;
  try {
    for (const auto& [path, bytes] : files) temporaries.push_back(write_temporary(path, bytes));
  } catch (...) {
    for (const std::string& t : temporaries) ::unlink(t.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temporaries[i].c_str(), files[i].first.c_str()) != 0) {
      const int err = errno;
      for (std::size_t j = i; j < files.size(); ++j) ::unlink(temporaries[j].c_str());
      fail(files[i].first, "rename into place", err);
    }
  }
}

}  // namespace qkv
