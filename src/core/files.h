// Writing output files so that an error never leaves a half-written or partial set behind.
//
// A path that is a regular file, or nothing yet, is written to a temporary file beside it and
// renamed into place; a symlink is followed, and its target is replaced (the link stays a link).
// Anything else that exists — /dev/null, /dev/full, a FIFO with a reader — is opened and written in
// place, never replaced: no O_CREAT, no O_TRUNC, no rename over a device node. A directory is a
// usage error. Two paths of one set naming the same file (`a.npy` and `./a.npy`, a hard link, a
// symlink) are a usage error too: one would silently overwrite the other.
//
// While temporaries exist, SIGINT, SIGTERM and SIGHUP remove them before the process dies of the
// signal, so an interrupted write leaves no `*.tmp.*` file behind.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace qkv {

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

// What a command checks before its (possibly long) work, so that the usual failures come before
// anything is computed or written. Empty paths are skipped. A directory, or two options naming one
// file, is a qkv::Error (Kind::invalid_argument); a folder that does not exist, is not a folder or
// cannot be written is Kind::runtime. Messages start with the option and the path:
//   "--out o.npy and --weights ./o.npy name the same file; expected a file each"
void check_outputs(const std::vector<OutputPath>& outputs);

// write_files_atomically for a command: each error names the option before the path.
void write_outputs(const std::vector<std::pair<OutputPath, std::string>>& outputs);

// For tests only: with QKV_TEST_PAUSE_AFTER_TEMPORARIES set in the environment, the writers pause
// (up to that many seconds) once every temporary is written and before any is renamed, so that a
// test can signal the process at that moment.
inline constexpr const char* kPauseAfterTemporariesEnv = "QKV_TEST_PAUSE_AFTER_TEMPORARIES";

}  // namespace qkv
