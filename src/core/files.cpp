// Atomic writes of a set of files: temporaries first, renames last.
#include "core/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "qkv/tensor.h"

namespace qkv {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error(path + ": cannot " + what + ": " + std::strerror(err), Error::Kind::runtime);
}

// Writes bytes to a fresh temporary file beside `path` and returns its name.
std::string write_temporary(const std::string& path, const std::string& bytes) {
  std::string name = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) fail(path, "write", errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      std::remove(name.c_str());
      fail(path, "write", err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    std::remove(name.c_str());
    fail(path, "write", err);
  }
  return name;
}

}  // namespace

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temporaries;
  try {
    for (const auto& [path, bytes] : files) temporaries.push_back(write_temporary(path, bytes));
  } catch (...) {
    for (const std::string& t : temporaries) std::remove(t.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temporaries[i].c_str(), files[i].first.c_str()) != 0) {
      const int err = errno;
      for (std::size_t j = i; j < files.size(); ++j) std::remove(temporaries[j].c_str());
      fail(files[i].first, "rename into place", err);
    }
  }
}

}  // namespace qkv
