// The one way qkv opens a file it reads: a regular file only, of bounded size, and never a blocking
// open. A FIFO, a device or a directory given where a file is expected is refused with one line
// that says what it is, before a byte is read; a FIFO cannot hang the open (O_NONBLOCK) and
// /dev/zero cannot eat the memory. Stdin, legitimately a pipe, is read with a bound instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qkv {

// What a kind of input file must be, for the checks and their messages.
struct InputSpec {
  // Ends "expected ..." when the path is not a regular file: "a regular .npy file".
  std::string_view expected = "a regular file";
  // A larger file is refused, the limit named in the message. Each kind picks one far above any
  // real file of its kind and below what would exhaust a machine's memory.
  uint64_t max_bytes = 0;
  // Names the file in "cannot open <noun>: <reason>", e.g. "the vocabulary"; empty: "cannot open".
  std::string_view noun = {};
};

// An open input file, checked by its constructor: a regular file no larger than the spec's limit.
// Every error is a qkv::Error (Kind::invalid_argument) whose message starts with the path, e.g.
//   "/tmp/f: is a FIFO (named pipe); expected a regular .npy file".
class InputFile {
 public:
  InputFile(const std::string& path, const InputSpec& spec);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // The size fstat reported when the file was opened.
  uint64_t size() const { return size_; }

  // Reads exactly `n` bytes at `offset` into `out`; a file that ends earlier (it shrank since it
  // was opened) is an error.
  void read_exactly(uint64_t offset, char* out, std::size_t n) const;
  // The file's bytes from the start to its end (at most the spec's limit: it may have grown).
  std::string read_all() const;

 private:
  std::string path_;
  InputSpec spec_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// InputFile(path, spec).read_all().
std::string read_input_file(const std::string& path, const InputSpec& spec);

// Reads `fd` (e.g. stdin, which may be a pipe or a terminal) to its end, but never more than
// `max_bytes`: a longer stream — /dev/zero — is a qkv::Error (Kind::invalid_argument) naming
// `label` and the limit.
std::string read_stream(int fd, std::string_view label, uint64_t max_bytes);

// "64 MiB", "16 GiB", "100 bytes": a byte count as the messages above show a limit.
std::string byte_count_str(uint64_t bytes);

}  // namespace qkv
