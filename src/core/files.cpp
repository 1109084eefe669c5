// Atomic writes of a set of files: temporaries first, in-place writes next, renames last.
#include "qkv/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "core/temporaries.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

namespace fs = std::filesystem;

// errno is taken as an argument, read before anything could clobber it.
[[noreturn]] void fail(const std::string& label, const char* what, int err) {
  throw Error(label + ": cannot " + what + ": " + std::strerror(err), Error::Kind::runtime);
}

// One file of a set: how messages name it, the path given and the file it finally names.
struct Target {
  std::string label;     // "--out o.npy", or the path
  std::string resolved;  // the path with the symlinks at its end followed
  bool exists = false;
  struct stat st {};
  // Regular files and new paths are replaced by a rename; anything else is written in place.
  bool in_place() const { return exists && !S_ISREG(st.st_mode); }
};

// The path a dangling symlink chain would create. The folders on the way need no resolving:
// rename() and open() follow them.
std::string resolve_links(const std::string& label, const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {  // Linux's own limit (MAXSYMLINKS)
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail(label, "follow the symlink", ec.value());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  fail(label, "follow the symlink", ELOOP);
}

// Set by reserve_standard_streams: a program that prints to its standard output and error.
std::atomic<bool> g_streams_reserved{false};

// An output that is the process's own standard output or error (`--out /dev/stdout`, or the file
// stdout is redirected to) would replace the file the report is printed to, or mix into it.
void check_not_standard_streams(const Target& t) {
  if (!t.exists || !g_streams_reserved.load()) return;
  const std::pair<int, const char*> streams[] = {
      {STDOUT_FILENO, "standard output, where it prints its report"},
      {STDERR_FILENO, "standard error, where it prints its messages"}};
  for (const auto& [fd, name] : streams) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) continue;
    if (S_ISCHR(st.st_mode) && ::isatty(fd) == 0) continue;  // /dev/null loses nothing to mix
    if (t.st.st_dev == st.st_dev && t.st.st_ino == st.st_ino)
      throw Error(t.label + " is the command's " + name + "; expected a file of its own",
                  Error::Kind::invalid_argument);
  }
}

Target target_of(const std::string& label, const std::string& path) {
  Target t{.label = label, .resolved = path};
  t.exists = ::stat(path.c_str(), &t.st) == 0;  // follows links, /proc/self/fd's included
  if (t.exists && S_ISDIR(t.st.st_mode))
    throw Error(label + ": is a directory; expected a file name", Error::Kind::invalid_argument);
  check_not_standard_streams(t);  // before its links are followed: a deleted file's cannot be
  struct stat link {};
  if (t.in_place() || ::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return t;
  // A symlink: the temporary goes beside the file it names, and replaces that file.
  if (t.exists) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) fail(label, "follow the symlink", errno);
    t.resolved = real;
    std::free(real);
  } else {
    t.resolved = resolve_links(label, path);
  }
  return t;
}

// The folder a temporary goes to: the resolved file's.
std::string folder_of(const Target& t) {
  const fs::path parent = fs::path(t.resolved).parent_path();
  return parent.empty() ? "." : parent.string();
}

// What makes two targets the same file: device and inode when it exists, else its folder's device
// and inode and its name (so that "a.npy", "./a.npy" and "d/../a.npy" are one file).
std::string identity_of(const Target& t) {
  auto id = [](const struct stat& s) {
    return std::to_string(s.st_dev) + ":" + std::to_string(s.st_ino);
  };
  if (t.exists) return id(t.st);
  struct stat folder {};
  const std::string name = fs::path(t.resolved).filename().string();
  if (::stat(folder_of(t).c_str(), &folder) == 0) return id(folder) + "/" + name;
  return fs::absolute(t.resolved).lexically_normal().string();
}

void check_distinct(const std::vector<Target>& targets) {
  std::vector<std::string> ids;
  for (const Target& t : targets) ids.push_back(identity_of(t));
  for (std::size_t i = 0; i < targets.size(); ++i)
    for (std::size_t j = i + 1; j < targets.size(); ++j)
      if (ids[i] == ids[j])
        throw Error(targets[i].label + " and " + targets[j].label +
                        " name the same file; expected a different file for each",
                    Error::Kind::invalid_argument);
}

// Writes bytes to a fresh temporary file beside the target, synced to disk, and returns its name
// and its slot in the signal handler's registry. Created with O_EXCL and mode 0666 so the umask
// applies as to a plain open() (mkstemp would make the result readable by its owner only).
std::pair<std::string, int> write_temporary(const Target& t, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string name;
  int fd = -1, slot = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    const auto salt =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter++ << 20) ^ static_cast<uint64_t>(::getpid());
    name = t.resolved + ".tmp." + std::to_string(salt % 1000000007);
    slot = register_temporary(name);  // before the file exists: a signal may come at any time
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      unregister_temporary(slot);
      if (err != EEXIST) fail(t.label, "write", err);
    }
  }
  if (fd < 0) fail(t.label, "write", EEXIST);

  auto abandon = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(name.c_str());
    unregister_temporary(slot);
    fail(t.label, what, err);
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
  return {name, slot};
}

// Opens a device or a FIFO for writing as it is: without O_CREAT or O_TRUNC, never replaced.
// O_NONBLOCK makes a FIFO without a reader an error rather than a hang.
int open_in_place(const Target& t) {
  const int fd = ::open(t.resolved.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && errno == ENXIO && S_ISFIFO(t.st.st_mode))
    throw Error(t.label + ": is a FIFO (named pipe) with no reader; expected a reader, or a file",
                Error::Kind::runtime);
  if (fd < 0) fail(t.label, "write", errno);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // a slow reader is waited for
  return fd;
}

// The FIFOs check_outputs found a reader on, their write ends held open until write_in_place
// writes to them: a FIFO has a reader only while it is open, so the check must open it, and
// closing it again would hand the reader its end of file before the work was done. By device and
// inode; what is never written is closed when the process ends.
std::mutex held_mutex;
std::map<std::pair<dev_t, ino_t>, int>& held_fifos() {
  static std::map<std::pair<dev_t, ino_t>, int> held;
  return held;
}

void hold_fifo(const Target& t) {
  const std::lock_guard<std::mutex> lock(held_mutex);
  auto& held = held_fifos();
  if (held.count({t.st.st_dev, t.st.st_ino}) == 0)
    held[{t.st.st_dev, t.st.st_ino}] = open_in_place(t);
}

int take_held_fifo(const Target& t) {
  const std::lock_guard<std::mutex> lock(held_mutex);
  auto& held = held_fifos();
  const auto it = held.find({t.st.st_dev, t.st.st_ino});
  if (it == held.end() || !S_ISFIFO(t.st.st_mode)) return -1;
  const int fd = it->second;
  held.erase(it);
  return fd;
}

// Writes to a device or a FIFO as it is (open_in_place, or the end check_outputs holds); SIGPIPE
// is held back so that a reader that goes away is an error (EPIPE) rather than the end of the
// process.
void write_in_place(const Target& t, const std::string& bytes) {
  int fd = take_held_fifo(t);
  if (fd < 0) fd = open_in_place(t);

  sigset_t pipe, old;
  ::sigemptyset(&pipe);
  ::sigaddset(&pipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe, &old);
  int err = 0;
  for (std::size_t done = 0; done < bytes.size() && err == 0;) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == EPIPE) {  // take the pending SIGPIPE before it is unblocked
    const timespec zero{};
    ::sigtimedwait(&pipe, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) fail(t.label, "write", err);
}

// The test hook of files.h: holds the process while its temporaries exist.
void pause_if_testing() {
  const char* seconds = std::getenv(kPauseAfterTemporariesEnv);
  if (seconds == nullptr) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(seconds)));
}

void write_targets(const std::vector<Target>& targets,
                   const std::vector<const std::string*>& contents) {
  check_distinct(targets);
  std::vector<std::pair<std::string, int>> temporaries(targets.size(), {"", -1});
  auto remove_temporaries = [&](std::size_t from) {
    for (std::size_t i = from; i < targets.size(); ++i) {
      if (temporaries[i].first.empty()) continue;
      ::unlink(temporaries[i].first.c_str());
      unregister_temporary(temporaries[i].second);
    }
  };
  try {
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (!targets[i].in_place()) temporaries[i] = write_temporary(targets[i], *contents[i]);
    pause_if_testing();
    // Devices and FIFOs cannot be undone: written after every temporary is ready, before any
    // regular file is replaced, so that their failure (/dev/full) leaves the regular files as
    // they were.
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i].in_place()) write_in_place(targets[i], *contents[i]);
  } catch (...) {
    remove_temporaries(0);
    throw;
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].in_place()) continue;
    const auto& [name, slot] = temporaries[i];
    if (std::rename(name.c_str(), targets[i].resolved.c_str()) != 0) {
      const int err = errno;
      remove_temporaries(i);
      fail(targets[i].label, "rename into place", err);
    }
    unregister_temporary(slot);
  }
}

}  // namespace

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<Target> targets;
  std::vector<const std::string*> contents;
  for (const auto& [path, bytes] : files) {
    targets.push_back(target_of(path, path));
    contents.push_back(&bytes);
  }
  write_targets(targets, contents);
}

void write_outputs(const std::vector<std::pair<OutputPath, std::string>>& outputs) {
  std::vector<Target> targets;
  std::vector<const std::string*> contents;
  for (const auto& [output, bytes] : outputs) {
    targets.push_back(target_of(output.option + " " + output.path, output.path));
    contents.push_back(&bytes);
  }
  write_targets(targets, contents);
}

namespace {

// An output that exists as a regular file must not be an input, nor a file of an input folder:
// it would be replaced by what was computed from it (`attend --keys k.npy --out k.npy`).
void check_not_inputs(const std::vector<Target>& outputs, const std::vector<InputPath>& inputs) {
  auto same = [](const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  };
  // The running program is an input no option names: `qkv train --out $(which qkv)` replaced the
  // qkv binary with a model file (issue 26's last sweep).
  struct stat program {};
  if (::stat("/proc/self/exe", &program) == 0)
    for (const Target& out : outputs)
      if (out.exists && same(program, out.st))
        throw Error(out.label + " is the running program itself; expected an output of its own",
                    Error::Kind::invalid_argument);
  for (const InputPath& in : inputs) {
    struct stat st {};
    if (in.path.empty() || ::stat(in.path.c_str(), &st) != 0) continue;  // its reader says why
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;          // a device is not replaced
    // Standard input (/dev/stdin, whatever file it is) is named by its option alone.
    const std::string input = in.path == "/dev/stdin" ? in.option : in.option + " " + in.path;
    for (const Target& out : outputs) {
      if (!out.exists || !S_ISREG(out.st.st_mode)) continue;  // nothing there to lose
      if (S_ISREG(st.st_mode) && same(st, out.st))
        throw Error(out.label + " and the input " + input +
                        " name the same file; expected an output other than the inputs",
                    Error::Kind::invalid_argument);
      struct stat folder {};
      if (S_ISDIR(st.st_mode) && ::stat(folder_of(out).c_str(), &folder) == 0 && same(st, folder))
        throw Error(out.label + " is a file of the input " + input +
                        "; expected an output outside the inputs",
                    Error::Kind::invalid_argument);
    }
  }
}

}  // namespace

void check_outputs(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  std::vector<Target> targets;
  for (const OutputPath& o : outputs) {
    if (o.path.empty()) continue;
    const Target& t = targets.emplace_back(target_of(o.option + " " + o.path, o.path));
    auto runtime = [&](const std::string& what) {
      throw Error(t.label + ": " + what, Error::Kind::runtime);
    };
    if (t.in_place()) {
      if (::access(t.resolved.c_str(), W_OK) != 0) fail(t.label, "write", errno);
      // A FIFO with no reader fails here, before the work, not after it (qkv train --out FIFO
      // trained for minutes first).
      if (S_ISFIFO(t.st.st_mode)) hold_fifo(t);
      continue;
    }
    // A temporary is created in the folder and renamed there.
    const std::string folder = folder_of(t);
    struct stat st {};
    const int err = ::stat(folder.c_str(), &st) == 0 ? 0 : errno;
    if (err == ENOENT) runtime("the folder " + folder + " does not exist");
    if (err == ENOTDIR || (err == 0 && !S_ISDIR(st.st_mode))) runtime(folder + " is not a folder");
    if (err != 0) runtime("cannot write in the folder " + folder + ": " + std::strerror(err));
    if (::access(folder.c_str(), W_OK | X_OK) != 0)
      runtime("cannot write in the folder " + folder + ": " + std::strerror(errno));
    // access() says yes to root for folders no file can be created in (/proc, /sys): try it, so
    // that `qkv train --out /proc/x` fails before the training, not after it (issue 26).
    const std::string probe = t.resolved + ".probe." + std::to_string(::getpid());
    const int slot = register_temporary(probe);
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const int probe_err = fd < 0 ? errno : 0;
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
    }
    unregister_temporary(slot);
    if (probe_err != 0 && probe_err != EEXIST)
      runtime("the folder " + folder + " does not take new files (creating one there fails: " +
              std::strerror(probe_err) + "); expected a path in a folder files can be written in");
  }
  check_distinct(targets);
  check_not_inputs(targets, inputs);
}

void reserve_standard_streams() { g_streams_reserved.store(true); }

}  // namespace qkv
