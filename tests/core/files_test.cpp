// Specification of core/files.h: a set of output files is written whole or not at all; regular
// files are replaced by a rename, devices and FIFOs are written in place and stay what they are,
// symlinks keep pointing at the file they name, a directory or two paths naming one file are usage
// errors, and check_outputs finds the usual failures before any work.
#include "qkv/files.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core/scratch_files.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using test::kind_of;
using test::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The qkv::Error that `write` throws, as "kind: message"; "" if none.
template <class F>
std::string error_of(F write) {
  try {
    write();
  } catch (const Error& e) {
    return std::string(e.kind() == Error::Kind::runtime ? "runtime: " : "usage: ") + e.what();
  }
  return "";
}

TEST(WriteFiles, ReplacesRegularFilesAndLeavesNoTemporary) {
  const ScratchDir dir;
  dir.write("a", "old");
  write_files_atomically({{dir.path("a"), "new a"}, {dir.path("b"), "new b"}});
  EXPECT_EQ(dir.read("a"), "new a");
  EXPECT_EQ(dir.read("b"), "new b");
  EXPECT_THAT(dir.names(), ElementsAre("a", "b"));
}

TEST(WriteFiles, DeviceNodeIsWrittenInPlaceNotReplaced) {
  // Renaming over /dev/null (as root) turned it into a regular file holding the output.
  const ScratchDir dir;
  const std::string null = dir.device("null", 1, 3);
  if (null.empty()) GTEST_SKIP() << "cannot make device nodes here (not root)";
  write_files_atomically({{null, "discarded"}, {dir.path("kept"), "kept"}});
  EXPECT_EQ(kind_of(null), S_IFCHR);
  EXPECT_EQ(dir.read("kept"), "kept");
  EXPECT_THAT(dir.names(), ElementsAre("kept", "null"));
}

TEST(WriteFiles, FullDeviceIsARuntimeErrorThatLeavesTheRegularFilesAlone) {
  const ScratchDir dir;
  const std::string full = dir.device("full", 1, 7);
  if (full.empty()) GTEST_SKIP() << "cannot make device nodes here (not root)";
  dir.write("a", "old a");
  EXPECT_EQ(error_of([&] {
              write_files_atomically({{dir.path("a"), "new a"}, {full, "x"}, {dir.path("b"), "b"}});
            }),
            "runtime: " + full + ": cannot write: No space left on device");
  EXPECT_EQ(kind_of(full), S_IFCHR);
  EXPECT_EQ(dir.read("a"), "old a");
  EXPECT_THAT(dir.names(), ElementsAre("a", "full"));  // no b, no temporary
}

TEST(WriteFiles, FifoWithAReaderGetsTheBytesAndStaysAFifo) {
  const ScratchDir dir;
  const std::string fifo = dir.fifo("pipe");
  const test::Watchdog watchdog(20);
  std::string received;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) received.append(buffer, n);
    ::close(fd);
  });
  // The writer's non-blocking open fails (ENXIO) until the reader has opened its end.
  std::string error;
  for (int attempt = 0; attempt < 500; ++attempt) {
    error = error_of([&] { write_files_atomically({{fifo, std::string(100000, 'q')}}); });
    if (error.empty()) break;
    ::usleep(10000);
  }
  reader.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(received, std::string(100000, 'q'));
  EXPECT_EQ(kind_of(fifo), S_IFIFO);
}

TEST(WriteFiles, FifoWithoutAReaderIsAnErrorNotAHang) {
  const ScratchDir dir;
  const std::string fifo = dir.fifo("pipe");
  const test::Watchdog watchdog(20);
  EXPECT_EQ(
      error_of([&] {
        write_files_atomically({{fifo, "x"}});
      }),
      "runtime: " + fifo + ": is a FIFO (named pipe) with no reader; expected a reader, or a file");
  EXPECT_EQ(kind_of(fifo), S_IFIFO);
}

// `qkv train --out FIFO` with no reader trained for minutes and failed only when it saved (issue
// 26, round 2): check_outputs finds the missing reader before the work. A FIFO has a reader only
// while the reader holds it open, so the check opens it; and it keeps it open until the write, for
// closing it would end the reader's file before anything was written.
TEST(CheckOutputs, FifoWithoutAReaderIsFoundBeforeTheWork) {
  const ScratchDir dir;
  const std::string fifo = dir.fifo("pipe");
  const test::Watchdog watchdog(20);
  EXPECT_EQ(error_of([&] {
              check_outputs({{"--out", fifo}});
            }),
            "runtime: --out " + fifo +
                ": is a FIFO (named pipe) with no reader; expected a reader, or a file");
  EXPECT_EQ(kind_of(fifo), S_IFIFO);
}

TEST(CheckOutputs, FifoWithAReaderGetsTheWholeOutputAfterTheCheck) {
  const ScratchDir dir;
  const std::string fifo = dir.fifo("pipe");
  const test::Watchdog watchdog(20);
  // The reader is there before the check (its end opened without waiting for a writer) and reads
  // until its end of file: all the output, or nothing if the check's open and close ended it.
  const int reader_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader_fd, 0);
  std::string received;
  EXPECT_EQ(error_of([&] { check_outputs({{"--out", fifo}}); }), "");
  ::fcntl(reader_fd, F_SETFL, ::fcntl(reader_fd, F_GETFL) & ~O_NONBLOCK);
  std::thread reader([&] {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(reader_fd, buffer, sizeof buffer)) > 0) received.append(buffer, n);
  });
  ::usleep(50000);  // the work: the reader waits, and sees no end of file
  EXPECT_EQ(error_of([&] { write_outputs({{{"--out", fifo}, std::string(1000, 'q')}}); }), "");
  reader.join();
  ::close(reader_fd);
  EXPECT_EQ(received, std::string(1000, 'q'));
}

TEST(WriteFiles, DirectoryIsAUsageErrorAndNothingIsWritten) {
  const ScratchDir dir;
  std::filesystem::create_directory(dir.path("d"));
  EXPECT_EQ(error_of([&] {
              write_files_atomically({{dir.path("a"), "a"}, {dir.path("d"), "d"}});
            }),
            "usage: " + dir.path("d") + ": is a directory; expected a file name");
  EXPECT_THAT(dir.names(), ElementsAre("d"));
}

TEST(WriteFiles, SymlinkKeepsPointingAtItsTargetWhichIsReplaced) {
  const ScratchDir dir;
  std::filesystem::create_directory(dir.path("real"));
  dir.write("real/target", "old");
  ASSERT_EQ(::symlink("real/target", dir.path("link").c_str()), 0);
  write_files_atomically({{dir.path("link"), "new"}});
  EXPECT_EQ(kind_of(dir.path("link")), S_IFLNK);
  EXPECT_EQ(dir.read("real/target"), "new");
  EXPECT_THAT(dir.names(), ElementsAre("link", "real"));
  // A dangling link creates the file it points to.
  ASSERT_EQ(::symlink("real/later", dir.path("dangling").c_str()), 0);
  write_files_atomically({{dir.path("dangling"), "made"}});
  EXPECT_EQ(kind_of(dir.path("dangling")), S_IFLNK);
  EXPECT_EQ(dir.read("real/later"), "made");
}

TEST(WriteFiles, TwoPathsNamingOneFileAreAUsageErrorBeforeAnythingIsWritten) {
  const ScratchDir dir;
  const std::string a = dir.path("a.npy");
  const std::string dotted = (dir.root() / "." / "a.npy").string();
  EXPECT_EQ(
      error_of([&] {
        write_files_atomically({{a, "1"}, {dotted, "2"}});
      }),
      "usage: " + a + " and " + dotted + " name the same file; expected a different file for each");
  EXPECT_TRUE(dir.names().empty());
  // A hard link and a symlink to an existing file are that file too.
  dir.write("a.npy", "old");
  ASSERT_EQ(::link(a.c_str(), dir.path("hard").c_str()), 0);
  ASSERT_EQ(::symlink("a.npy", dir.path("soft").c_str()), 0);
  EXPECT_THAT(error_of([&] {
                write_files_atomically({{a, "1"}, {dir.path("hard"), "2"}});
              }),
              HasSubstr("name the same file"));
  EXPECT_THAT(error_of([&] {
                write_files_atomically({{dir.path("soft"), "1"}, {a, "2"}});
              }),
              HasSubstr("name the same file"));
  EXPECT_EQ(dir.read("a.npy"), "old");
}

TEST(WriteOutputs, ErrorsNameTheOption) {
  const ScratchDir dir;
  EXPECT_EQ(error_of([&] {
              write_outputs({{{"--out", dir.path("a")}, "a"}, {{"--weights", dir.path("a")}, "w"}});
            }),
            "usage: --out " + dir.path("a") + " and --weights " + dir.path("a") +
                " name the same file; expected a different file for each");
  EXPECT_EQ(
      error_of([&] {
        write_outputs({{{"--html", dir.path("no/r.html")}, "x"}});
      }),
      "runtime: --html " + dir.path("no/r.html") + ": cannot write: No such file or directory");
}

TEST(CheckOutputs, FindsTheUsualFailuresBeforeAnyWork) {
  const ScratchDir dir;
  dir.write("plain", "a file");
  std::filesystem::create_directory(dir.path("d"));
  auto check = [](std::vector<OutputPath> outputs) {
    return error_of([&] { check_outputs(outputs); });
  };
  EXPECT_EQ(check({{"--out", dir.path("new.npy")}, {"--lse", ""}}), "");  // empty: not asked for
  EXPECT_EQ(check({{"--out", dir.path("no/o.npy")}}), "runtime: --out " + dir.path("no/o.npy") +
                                                          ": the folder " + dir.path("no") +
                                                          " does not exist");
  EXPECT_EQ(
      check({{"--out", dir.path("plain/o.npy")}}),
      "runtime: --out " + dir.path("plain/o.npy") + ": " + dir.path("plain") + " is not a folder");
  EXPECT_EQ(check({{"--html", dir.path("d")}}),
            "usage: --html " + dir.path("d") + ": is a directory; expected a file name");
  EXPECT_EQ(check({{"--out", "o.npy"}, {"--weights", "./o.npy"}}),
            "usage: --out o.npy and --weights ./o.npy name the same file; expected a different "
            "file for each");
  EXPECT_EQ(check({{"--out", "/dev/null"}}), "");
  // access() lets root write in /proc, where no file can be created: `--lse /proc/version` said
  // "No such file or directory" after the work, `train --out /proc/x` after the training.
  EXPECT_EQ(check({{"--lse", "/proc/version"}}),
            ::geteuid() == 0
                ? "runtime: --lse /proc/version: the folder /proc does not take new files "
                  "(creating one there fails: No such file or directory); expected a path in a "
                  "folder files can be written in"
                : "runtime: --lse /proc/version: cannot write in the folder /proc: Permission "
                  "denied");
  EXPECT_TRUE(dir.names() == (std::vector<std::string>{"d", "plain"}));  // nothing was created
  EXPECT_EQ(check({{"--out", dir.path("fine.npy")}}), "");
  EXPECT_TRUE(dir.names() == (std::vector<std::string>{"d", "plain"}));  // the probe is gone
}

// `qkv attend --keys k.npy --out k.npy` replaced its own input (issue 26): an output that is one of
// the command's input files — by any name: ./k.npy, a hard link, a symlink — or an existing file
// inside an input folder (a model directory) is a usage error before any work.
TEST(CheckOutputs, AnOutputThatWouldReplaceAnInputIsRefused) {
  const ScratchDir dir;
  dir.write("k.npy", "keys");
  dir.write("q.npy", "queries");
  std::filesystem::create_directory(dir.path("model"));
  dir.write("model/vocab.txt", "[PAD]");
  ASSERT_EQ(::link(dir.path("k.npy").c_str(), dir.path("hard.npy").c_str()), 0);
  std::filesystem::create_symlink(dir.path("k.npy"), dir.path("soft.npy"));
  const std::vector<InputPath> inputs = {{"--query", dir.path("q.npy")},
                                         {"--keys", dir.path("k.npy")},
                                         {"--model", dir.path("model")}};
  auto check = [&](const std::string& option, const std::string& path) {
    return error_of([&] { check_outputs({{option, path}}, inputs); });
  };
  const std::string same = " and the input --keys " + dir.path("k.npy") +
                           " name the same file; expected an output other than the inputs";
  EXPECT_EQ(check("--out", dir.path("k.npy")), "usage: --out " + dir.path("k.npy") + same);
  EXPECT_EQ(check("--out", dir.path("./k.npy")), "usage: --out " + dir.path("./k.npy") + same);
  EXPECT_EQ(check("--weights", dir.path("hard.npy")),
            "usage: --weights " + dir.path("hard.npy") + same);
  EXPECT_EQ(check("--lse", dir.path("soft.npy")), "usage: --lse " + dir.path("soft.npy") + same);
  EXPECT_EQ(check("--html", dir.path("model/vocab.txt")),
            "usage: --html " + dir.path("model/vocab.txt") + " is a file of the input --model " +
                dir.path("model") + "; expected an output outside the inputs");
  // A new file, even inside the model folder, replaces nothing; nor does a device.
  EXPECT_EQ(check("--out", dir.path("o.npy")), "");
  EXPECT_EQ(check("--html", dir.path("model/report.html")), "");
  EXPECT_EQ(check("--out", "/dev/null"), "");
  // An input that does not exist (its reader reports it) or is inline is no reason to refuse.
  EXPECT_EQ(error_of([&] {
              check_outputs({{"--out", dir.path("q.npy")}}, {{"--keys", dir.path("none.npy")}});
            }),
            "");
  EXPECT_EQ(dir.read("k.npy"), "keys");
  EXPECT_EQ(dir.read("q.npy"), "queries");
}

}  // namespace
}  // namespace qkv
