// Opening input files: O_NONBLOCK so that opening a FIFO returns at once (a FIFO with no writer
// would otherwise block the open forever), then fstat on the open descriptor (no race with a rename
// between a stat and the open) decides whether it is read at all.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

[[noreturn]] void fail(std::string_view path, const std::string& what) {
  throw Error(std::string(path) + ": " + what, Error::Kind::invalid_argument);
}

// "is a FIFO (named pipe)" for anything but a regular file; empty for a regular file.
std::string what_it_is(mode_t mode) {
  if (S_ISREG(mode)) return {};
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

// What a shell's process substitution, `<(command)`, passes: /dev/fd/N or /proc/self/fd/N, a pipe.
// It is refused as FIFOs are (a reader of one could wait forever), and the message says what to do.
std::string pipe_hint(const std::string& path, mode_t mode) {
  if (!S_ISFIFO(mode) || (path.rfind("/dev/fd/", 0) != 0 && path.rfind("/proc/self/fd/", 0) != 0))
    return "";
  return " (a shell's <(command) is a pipe: save its output to a file and name that)";
}

}  // namespace

std::string byte_count_str(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024;
  for (const auto& [unit, name] : {std::pair{kKiB * kKiB * kKiB, " GiB"},
                                   std::pair{kKiB * kKiB, " MiB"}, std::pair{kKiB, " KiB"}})
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + name;
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

InputFile::InputFile(const std::string& path, const InputSpec& spec) : path_(path), spec_(spec) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    // A socket cannot be opened at all (ENXIO): say what it is rather than the errno's words.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      fail(path, what_it_is(st.st_mode) + "; expected " + std::string(spec.expected) +
                     pipe_hint(path, st.st_mode));
    std::string what = "cannot open";
    if (!spec.noun.empty()) what.append(" ").append(spec.noun);
    fail(path, what + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(path, std::string("cannot read: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(path, what_it_is(st.st_mode) + "; expected " + std::string(spec.expected) +
                   pipe_hint(path, st.st_mode));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > spec.max_bytes) {
    ::close(fd_);
    fail(path, "has " + std::to_string(size_) + " bytes; expected " + std::string(spec.expected) +
                   " of at most " + byte_count_str(spec.max_bytes));
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_exactly(uint64_t offset, char* out, std::size_t n) const {
  for (std::size_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, std::string("cannot read: ") + std::strerror(errno));
    if (got == 0)
      fail(path_, "ended at byte " + std::to_string(offset + done) + " while " +
                      std::to_string(offset + n) +
                      " were expected (did it change while being read?)");
    done += static_cast<std::size_t>(got);
  }
}

std::string InputFile::read_all() const {
  std::string bytes(static_cast<std::size_t>(size_), '\0');
  std::size_t done = 0;
  // To EOF rather than exactly size(): a file may have grown, and those of /proc report size 0.
  char chunk[1 << 16];
  for (;;) {
    const bool within = done < bytes.size();
    char* to = within ? bytes.data() + done : chunk;
    const std::size_t room = within ? bytes.size() - done : sizeof chunk;
    const ssize_t got = ::pread(fd_, to, room, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, std::string("cannot read: ") + std::strerror(errno));
    if (got == 0) break;
    const auto n = static_cast<std::size_t>(got);
    if (!within) {
      if (done + n > spec_.max_bytes)
        fail(path_, "has more than " + byte_count_str(spec_.max_bytes) + "; expected " +
                        std::string(spec_.expected) + " of at most " +
                        byte_count_str(spec_.max_bytes));
      bytes.append(chunk, n);
    }
    done += n;
  }
  bytes.resize(done);
  return bytes;
}

std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (s.size() - i <= static_cast<std::size_t>(extra)) return i;
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return i;
    }
    i += extra + 1;
  }
  return std::string_view::npos;
}

std::string read_input_file(const std::string& path, const InputSpec& spec) {
  return InputFile(path, spec).read_all();
}

std::string read_stream(int fd, std::string_view label, uint64_t max_bytes) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a non-blocking pipe: wait
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (got < 0) fail(label, std::string("cannot read: ") + std::strerror(errno));
    if (got == 0) return bytes;
    if (bytes.size() + static_cast<std::size_t>(got) > max_bytes)
      fail(label, "more than " + byte_count_str(max_bytes) + " of input; expected at most " +
                      byte_count_str(max_bytes));
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
}

}  // namespace qkv
