// core/stdout.cpp — standard output, checked (qkv/files.h: use_checked_stdout, flush_stdout).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <string>

#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

// std::cout's buffer: 64 KiB written to descriptor 1 by write(2), the first failure's errno kept.
// After a failure what is buffered is dropped and every later write fails too: the output is
// broken, and the command will say so.
class CheckedStdout : public std::streambuf {
 public:
  CheckedStdout() : line_buffered_(::isatty(STDOUT_FILENO) == 1) { setp(buffer_, buffer_ + kSize); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
    if (line_buffered_ && traits_type::to_char_type(c) == '\n' && sync() != 0)
      return traits_type::eof();
    return c;
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::streamsize done = 0;
    while (done < n) {
      if (pptr() == epptr() && sync() != 0) return done;
      const std::streamsize room = epptr() - pptr();
      const std::streamsize take = std::min(room, n - done);
      std::memcpy(pptr(), s + done, static_cast<std::size_t>(take));
      pbump(static_cast<int>(take));
      done += take;
    }
    if (line_buffered_ && std::memchr(s, '\n', static_cast<std::size_t>(n)) != nullptr &&
        sync() != 0)
      return 0;
    return done;
  }

  int sync() override {
    const char* p = pbase();
    const char* end = pptr();
    setp(buffer_, buffer_ + kSize);
    if (error_ != 0) return -1;
    while (p < end) {
      const ssize_t n = ::write(STDOUT_FILENO, p, static_cast<std::size_t>(end - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        return -1;
      }
      p += n;
    }
    return 0;
  }

 private:
  static constexpr std::ptrdiff_t kSize = 1 << 16;
  char buffer_[kSize];
  bool line_buffered_;
  int error_ = 0;
};

// Never destroyed: std::cout is flushed once more when the program ends, after every static
// object of this file would be gone.
CheckedStdout* checked = nullptr;

}  // namespace

void use_checked_stdout() {
  if (checked != nullptr) return;
  std::cout.flush();
  checked = new CheckedStdout;
  std::cout.rdbuf(checked);
}

void flush_stdout() {
  std::cout.flush();
  const int err = checked != nullptr ? checked->error() : 0;
  if (err == 0 && !std::cout.fail()) return;
  throw Error(std::string("cannot write to standard output") +
                  (err != 0 ? std::string(": ") + std::strerror(err) : ""),
              Error::Kind::runtime);
}

}  // namespace qkv
