// qkv/files.h — how qkv reads and writes files, for the library and for programs built on it.
//
// Reading: the one way qkv opens a file it reads — a regular file only, of bounded size, and
// never a blocking open. A FIFO, a device or a directory given where a file is expected is refused
// with one line that says what it is, before a byte is read; a FIFO cannot hang the open
// (O_NONBLOCK) and /dev/zero cannot eat the memory. Stdin, legitimately a pipe, is read with a
// bound instead.
//
// Writing: output files written so that an error never leaves a half-written or partial set
// behind. A path that is a regular file, or nothing yet, is written to a temporary file beside it
// and renamed into place; a symlink is followed, and its target is replaced (the link stays a
// link). Anything else that exists — /dev/null, /dev/full, a FIFO with a reader — is opened and
// written in place, never replaced: no O_CREAT, no O_TRUNC, no rename over a device node. A
// directory is a usage error. Two paths of one set naming the same file (`a.npy` and `./a.npy`, a
// hard link, a symlink) are a usage error too: one would silently overwrite the other.
//
// While temporaries exist, SIGINT, SIGTERM and SIGHUP remove them before the process dies of the
// signal, so an interrupted write leaves no `*.tmp.*` file behind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkv {

// ---- reading ----

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

// The offset of the first byte of `text` that is not valid UTF-8, or std::string_view::npos.
// Strict, as Rust's str::from_utf8: no overlong forms, surrogates or code points above U+10FFFF.
std::size_t invalid_utf8_at(std::string_view text);

// ---- writing ----

// Writes every (path, bytes) pair as one set: first all regular files to temporaries beside them,
// then the in-place files (devices, FIFOs), then the renames. On any failure the temporaries are
// removed and a qkv::Error names the path that failed: Kind::runtime when it cannot be written,
// Kind::invalid_argument for a directory or two paths naming one file. No regular file of the set
// is touched before all are ready.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

// One output of a command: the option that names it in messages ("--out") and its path.
struct OutputPath {
  std::string option;
  std::string path;
};

// One input of a command, for check_outputs: the option that names it ("--keys", "--model") and
// its path (a file, or a folder such as a model directory). {"stdin", "/dev/stdin"}: the
// command's standard input, whatever file it is.
struct InputPath {
  std::string option;
  std::string path;
};

// What a command checks before its (possibly long) work, so that the usual failures come before
// anything is computed or written. Empty paths are skipped. A FIFO without a reader is an error
// here (Kind::runtime); one with a reader is kept open until write_outputs writes to it, so that
// the reader waits for the result instead of seeing an empty file. A directory, or two options
// naming one file, is a qkv::Error (Kind::invalid_argument); a folder that does not exist, is not a
// folder or cannot be written is Kind::runtime. Messages start with the option and the path:
//   "--out o.npy and --weights ./o.npy name the same file; expected a file each"
// An output that would replace one of the command's `inputs` — the same file (device and inode),
// or an existing file inside an input folder — is Kind::invalid_argument as well:
//   "--out k.npy and the input --keys ./k.npy name the same file; expected an output other than
//    the inputs"
void check_outputs(const std::vector<OutputPath>& outputs,
                   const std::vector<InputPath>& inputs = {});

// For a program that prints its report to its standard output and error (the qkv command): from
// this call on, an output naming the same file as either (`--out /dev/stdout`, or the file stdout
// is redirected to) is a qkv::Error (Kind::invalid_argument) in check_outputs and the writers —
// replacing that file would lose the report, writing into it would mix the two. A library user that
// prints nothing may write to /dev/stdout as to any file.
void reserve_standard_streams();

// Standard output, checked: what a program prints reaches its destination or it fails.
// `qkv explain --json > /dev/full` used to exit 0 having written nothing, and on a full disk it
// wrote 48 KiB of 4.5 MB and exited 0 (issue 26): a stream that fails only sets a flag.
// Gives std::cout a buffer of its own on file descriptor 1 that keeps the reason (errno) of the
// first write that fails: C's stdio, beneath std::cout by default, loses it in the flushes
// std::cout makes itself. Line-buffered on a terminal, as stdio is. The qkv command calls it first.
void use_checked_stdout();

// Flushes std::cout; throws qkv::Error (Kind::runtime) when anything printed so far could not be
// written: "cannot write to standard output: No space left on device". The qkv command calls it
// after every command; a command that streams its output (generate's tokens, bench's rows) calls
// it after each piece, so that it stops at the first failure.
void flush_stdout();

// write_files_atomically for a command: each error names the option before the path.
void write_outputs(const std::vector<std::pair<OutputPath, std::string>>& outputs);

// For tests only: with QKV_TEST_PAUSE_AFTER_TEMPORARIES set in the environment, the writers pause
// (up to that many seconds) once every temporary is written and before any is renamed, so that a
// test can signal the process at that moment.
inline constexpr const char* kPauseAfterTemporariesEnv = "QKV_TEST_PAUSE_AFTER_TEMPORARIES";

}  // namespace qkv
