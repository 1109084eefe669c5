// tests/cli/files_cli_test.cpp — the files `qkv` reads and writes, under hostile paths (issue 11):
// a FIFO, a device or a directory where an input file belongs is refused at once with one line and
// exit 2, never waited on or read until memory runs out; outputs are written as one set, checked
// before the work, never replace a device node or lose one output to another, and leave no
// temporary behind when the process is interrupted. Every run that once hung has a time limit.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_runner.h"
#include "core/scratch_files.h"
#include "qkv/files.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::run_qkv;
using testing::RunOptions;

constexpr int kLimit = 60;  // seconds: far beyond any of these runs, short of a hung suite

// Runs qkv with the time limit.
CliResult run_limited(const std::vector<std::string>& args, RunOptions options = {}) {
  options.timeout_s = kLimit;
  return run_qkv(args, options);
}

// The error contract: exit `code`, exactly "qkv: error: <line>\n" on stderr, nothing on stdout.
void expect_error(const CliResult& r, int code, const std::string& line) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, code) << r.describe();
  EXPECT_EQ(r.err, "qkv: error: " + line + "\n") << r.describe();
  EXPECT_EQ(r.out, "") << r.describe();
}

bool has_temporary(const test::ScratchDir& dir) {
  for (const std::string& name : dir.names())
    if (name.find(".tmp.") != std::string::npos) return true;
  return false;
}

// A scratch folder with small valid inputs: q [3, 4], k and v [5, 4] (float32).
class FilesCli : public ::testing::Test {
 protected:
  FilesCli() {
    std::vector<float> values(20);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * static_cast<float>(i % 7);
    q_ = dir_.write("q.npy", encode_npy(Tensor::from(
                                 {3, 4}, std::vector<float>(values.begin(), values.begin() + 12))));
    k_ = dir_.write("k.npy", encode_npy(Tensor::from({5, 4}, values)));
    v_ = dir_.write("v.npy", encode_npy(Tensor::from({5, 4}, values)));
  }

  std::vector<std::string> attend(std::initializer_list<std::string> extra) const {
    std::vector<std::string> args{"attend", "--query", q_, "--keys", k_, "--values", v_};
    args.insert(args.end(), extra);
    return args;
  }

  test::ScratchDir dir_{"qkv-files-cli"};
  std::string q_, k_, v_;
};

// ---- inputs that are not regular files

TEST_F(FilesCli, AttendInputFifoIsRefusedNotWaitedOn) {
  const std::string fifo = dir_.fifo("fifo.npy");
  const std::string expected = fifo + ": is a FIFO (named pipe); expected a regular .npy file";
  expect_error(run_limited({"attend", "--query", fifo, "--keys", k_, "--values", v_}), 2,
               "--query " + expected);
  expect_error(run_limited({"attend", "--query", q_, "--keys", fifo, "--values", v_}), 2,
               "--keys " + expected);
  expect_error(run_limited({"attend", "--query", q_, "--keys", k_, "--values", fifo}), 2,
               "--values " + expected);
  expect_error(run_limited(attend({"--mask", fifo})), 2, "--mask " + expected);
  expect_error(run_limited(attend({"--score", "general", "--params", fifo})), 2,
               "--params " + expected);
}

TEST_F(FilesCli, AttendInputDeviceOrDirectoryIsRefused) {
  expect_error(run_limited({"attend", "--query", "/dev/zero", "--keys", k_, "--values", v_}), 2,
               "--query /dev/zero: is a character device; expected a regular .npy file");
  const std::string folder = dir_.root().string();
  expect_error(run_limited({"attend", "--query", folder, "--keys", k_, "--values", v_}), 2,
               "--query " + folder + ": is a directory; expected a regular .npy file");
}

TEST_F(FilesCli, CorpusThatIsNotARegularFileIsRefused) {
  const std::string fifo = dir_.fifo("corpus.txt");
  const std::string folder = dir_.root().string();
  const std::string expected = "; expected a regular text file, one text a line";
  expect_error(run_limited({"search", "q", "--corpus", fifo}), 2,
               "--corpus " + fifo + ": is a FIFO (named pipe)" + expected);
  // A directory once gave "has no non-empty lines".
  expect_error(run_limited({"search", "q", "--corpus", folder}), 2,
               "--corpus " + folder + ": is a directory" + expected);
  expect_error(run_limited({"search", "q", "--corpus", "/dev/zero"}), 2,
               "--corpus /dev/zero: is a character device" + expected);
  expect_error(run_limited({"bench", "model", "--corpus", fifo}), 2,
               "--corpus " + fifo + ": is a FIFO (named pipe)" + expected);
  // A shell's <(command) is a pipe too: refused as one, with what to do instead (issue 26).
  const CliResult piped = testing::run_program(
      "/bin/bash", {"-c", "exec \"$0\" search q --corpus <(echo text)", testing::qkv_binary()},
      {.timeout_s = 30});
  EXPECT_EQ(piped.exit_code, 2) << piped.describe();
  EXPECT_THAT(piped.err,
              ::testing::MatchesRegex("qkv: error: --corpus /(dev|proc/self)/fd/[0-9]+: is a FIFO "
                                      "\\(named pipe\\); expected a regular text file, one text a "
                                      "line \\(a shell's <\\(command\\) is a pipe: save its output "
                                      "to a file and name that\\)\n"))
      << piped.describe();
}

// A Perceiver, trained for a few steps once for the tests below (its weights do not matter).
const std::string& perceiver_model() {
  static const std::string path = [] {
    const std::string p = (fs::temp_directory_path() / "qkv-files-cli-count.safetensors").string();
    const CliResult r =
        run_qkv({"train",     "--model",   "perceiver", "--task",  "count",
                 "--length",  "32",        "--latents", "4",       "--steps",
                 "2",         "--layers",  "1",         "--heads", "2",
                 "--d-model", "16",        "--batch",   "8",       "--test-examples",
                 "4",         "--threads", "1",         "--out",   p});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return p;
  }();
  return path;
}

// `explain --input @FILE` opened the file with an ifstream: a FIFO blocked forever, /dev/zero was
// read for 4 GB, a sparse 2 GB file whole before it was refused, and a directory was "0 symbols"
// (issue 26). It is an InputFile now, of at most 1 MiB (a Perceiver reads 65,536 symbols at most).
TEST_F(FilesCli, PerceiverInputFileIsCheckedBeforeItIsRead) {
  const std::string model = perceiver_model();
  auto explain = [&](const std::string& file) {
    return run_limited({"explain", "--model", model, "--input", "@" + file});
  };
  const std::string expected = "; expected a regular text file holding the input";
  const std::string fifo = dir_.fifo("input.txt");
  expect_error(explain(fifo), 2, "--input @" + fifo + ": is a FIFO (named pipe)" + expected);
  expect_error(explain("/dev/zero"), 2, "--input @/dev/zero: is a character device" + expected);
  const std::string folder = dir_.root().string();
  expect_error(explain(folder), 2, "--input @" + folder + ": is a directory" + expected);
  const std::string sparse = dir_.path("sparse.txt");
  { std::ofstream(sparse).close(); }
  fs::resize_file(sparse, uint64_t{2} << 30);  // 2 GiB of holes: nothing on the disk
  expect_error(explain(sparse), 2,
               "--input @" + sparse + ": has 2147483648 bytes" + expected + " of at most 1 MiB");
  expect_error(
      explain(dir_.path("none.txt")), 2,
      "--input @" + dir_.path("none.txt") + ": cannot open the input: No such file or directory");
  // A file of the right length is read, its final newline dropped.
  const std::string input = dir_.write("ok.txt", std::string(32, '#') + "\n");
  const CliResult ok = explain(input);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_THAT(ok.out, HasSubstr("32 symbols"));
}

// `qkv attend --keys k.npy --out k.npy` replaced its own input with the result (issue 26). An
// output that would replace an input of the same command — by any name — is refused before the
// work, in every command that reads files and writes them.
TEST_F(FilesCli, AnOutputThatWouldReplaceAnInputIsRefused) {
  const std::string keys = dir_.read("k.npy");
  const std::string same = " name the same file; expected an output other than the inputs";
  expect_error(run_limited(attend({"--out", k_})), 2,
               "--out " + k_ + " and the input --keys " + k_ + same);
  fs::create_symlink(q_, dir_.path("alias.npy"));
  expect_error(run_limited(attend({"--weights", dir_.path("alias.npy")})), 2,
               "--weights " + dir_.path("alias.npy") + " and the input --query " + q_ + same);
  EXPECT_EQ(dir_.read("k.npy"), keys);

  const std::string texts = dir_.write("texts.txt", "one text\n");
  expect_error(run_limited({"embed", "--npy", texts}, {.stdin_path = texts}), 2,
               "--npy " + texts + " and the input stdin" + same);
  expect_error(
      run_limited({"bench", "model", "--quick", "--corpus", texts, "--dump-corpus", texts}), 2,
      "--dump-corpus " + texts + " and the input --corpus " + texts + same);
  EXPECT_EQ(dir_.read("texts.txt"), "one text\n");

  const std::string model = dir_.path("count.safetensors");
  fs::copy_file(perceiver_model(), model);
  expect_error(run_limited({"explain", "--model", model, "--html", model}), 2,
               "--html " + model + " and the input --model " + model + same);
  const std::string input = dir_.write("input.txt", std::string(32, '#'));
  expect_error(run_limited({"explain", "--model", model, "--input", "@" + input, "--html", input}),
               2, "--html " + input + " and the input --input " + input + same);
  EXPECT_EQ(dir_.read("input.txt"), std::string(32, '#'));

  // The program itself: `qkv train --out $(which qkv)` replaced the binary with a model file.
  const std::string program = dir_.path("qkv-copy");
  fs::copy_file(testing::qkv_binary(), program);
  const auto before = fs::file_size(program);
  const testing::CliResult r = testing::run_program(
      program, {"train", "--task", "copy", "--steps", "1", "--out", program}, {.timeout_s = 60});
  expect_error(r, 2, "--out " + program + " is the running program itself; expected an output of "
                                          "its own");
  EXPECT_EQ(fs::file_size(program), before);
}

// `--out /dev/stdout > rep.txt` replaced rep.txt with the .npy (the report lost, exit 0), and
// `--out /dev/stdout | …` mixed the two: an output that is the command's own standard output or
// error — however named — is refused before any work.
TEST_F(FilesCli, AnOutputThatIsTheCommandsOwnStdoutOrStderrIsRefused) {
  const std::string to_stdout =
      " is the command's standard output, where it prints its report; "
      "expected a file of its own";
  // Through the test's pipe: /dev/stdout and /proc/self/fd/1 are that pipe.
  expect_error(run_limited(attend({"--out", "/dev/stdout"})), 2, "--out /dev/stdout" + to_stdout);
  expect_error(run_limited(attend({"--weights", "/proc/self/fd/1"})), 2,
               "--weights /proc/self/fd/1" + to_stdout);
  // Redirected to a file, named by that file's own path and through /dev/stdout: the file keeps
  // what the shell put there (nothing), not the .npy.
  const std::string report = dir_.path("report.txt");
  for (const std::string& out : {report, std::string("/dev/stdout")}) {
    std::vector<std::string> args = {"-c", "exec \"$0\" \"$@\" > " + report, testing::qkv_binary()};
    const std::vector<std::string> a = attend({"--out", out});
    args.insert(args.end(), a.begin(), a.end());
    const CliResult r = testing::run_program("/bin/sh", args, RunOptions{.timeout_s = kLimit});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, "qkv: error: --out " + out + to_stdout + "\n") << r.describe();
    EXPECT_EQ(dir_.read("report.txt"), "") << out;
  }
  CliResult r = run_limited(attend({"--out", "/dev/stderr"}));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--out /dev/stderr is the command's standard error, where it "
                               "prints its messages; expected a file of its own"));
}

TEST_F(FilesCli, EndlessStdinStopsAtItsLimit) {
  // `qkv embed < /dev/zero` read until memory ran out.
  expect_error(run_limited({"embed"}, {.stdin_path = "/dev/zero"}), 2,
               "stdin: more than 64 MiB of input; expected at most 64 MiB");
}

TEST_F(FilesCli, ModelFileThatIsNotARegularFileIsRefused) {
  // The files only need to exist for the check; none is read when one of them is refused.
  const std::string model = dir_.path("model");
  fs::create_directory(model);
  dir_.write("model/config.json", "{}");
  dir_.write("model/model.safetensors", "x");
  dir_.write("model/vocab.txt", "x");
  fs::remove(model + "/config.json");
  dir_.fifo("model/config.json");
  expect_error(
      run_limited({"embed", "text", "--model", model}), 2,
      "--model " + model + "/config.json: is a FIFO (named pipe); expected a regular JSON file");
  fs::remove(model + "/config.json");
  dir_.write("model/config.json", "{}");
  fs::remove(model + "/model.safetensors");
  dir_.fifo("model/model.safetensors");
  expect_error(run_limited({"explain", "text", "--model", model}), 2,
               "--model " + model +
                   "/model.safetensors: is a FIFO (named pipe); expected a regular .safetensors "
                   "file");
  fs::remove(model + "/model.safetensors");
  dir_.write("model/model.safetensors", "x");
  fs::remove(model + "/vocab.txt");
  ASSERT_EQ(::symlink("/dev/zero", (model + "/vocab.txt").c_str()), 0);
  const std::string corpus = dir_.write("corpus.txt", "a line of text\n");  // read before the model
  expect_error(
      run_limited({"search", "q", "--corpus", corpus, "--model", model}), 2,
      "--model " + model + "/vocab.txt: is a character device; expected a regular text file");
}

TEST_F(FilesCli, TrainedModelFifoIsRefused) {
  const std::string fifo = dir_.fifo("dates.safetensors");
  expect_error(run_limited({"explain", "--model", fifo, "--input", "march 3rd 2021"}), 2,
               fifo + ": is a FIFO (named pipe); expected a regular .safetensors file");
}

// ---- outputs that are not regular files

TEST_F(FilesCli, OutputToADeviceWritesThroughItAndKeepsTheDevice) {
  // As root, the rename of the temporary replaced /dev/null with a regular file.
  const std::string null = dir_.device("null", 1, 3);
  if (null.empty()) GTEST_SKIP() << "cannot make device nodes here (not root)";
  const CliResult r = run_limited(attend({"--out", null}));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(test::kind_of(null), S_IFCHR);
}

TEST_F(FilesCli, OutputToAFullDeviceIsARuntimeErrorAndWritesNothingElse) {
  const std::string full = dir_.device("full", 1, 7);
  if (full.empty()) GTEST_SKIP() << "cannot make device nodes here (not root)";
  const std::string weights = dir_.path("w.npy");
  expect_error(run_limited(attend({"--out", full, "--weights", weights})), 1,
               "--out " + full + ": cannot write: No space left on device");
  EXPECT_EQ(test::kind_of(full), S_IFCHR);
  EXPECT_FALSE(fs::exists(weights));
  EXPECT_FALSE(has_temporary(dir_));
}

TEST_F(FilesCli, TrainedModelToADeviceKeepsTheDevice) {
  // qkv train --out /dev/null (as root) replaced /dev/null; /dev/full "succeeded".
  const std::string null = dir_.device("null", 1, 3), full = dir_.device("full", 1, 7);
  if (null.empty()) GTEST_SKIP() << "cannot make device nodes here (not root)";
  const std::vector<std::string> tiny = {
      "train", "--task",          "copy", "--steps",   "2", "--layers",
      "1",     "--heads",         "1",    "--d-model", "8", "--batch",
      "4",     "--test-examples", "4",    "--threads", "1", "--out"};
  std::vector<std::string> to_null = tiny, to_full = tiny;
  to_null.push_back(null);
  to_full.push_back(full);
  const CliResult r = run_limited(to_null);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(test::kind_of(null), S_IFCHR);
  const CliResult f = run_limited(to_full);
  EXPECT_EQ(f.exit_code, 1) << f.describe();
  // The progress lines of training come first; the error is the last line.
  EXPECT_THAT(f.err, ::testing::EndsWith("\nqkv: error: --out " + full +
                                         ": cannot write: No space left on device\n"));
  EXPECT_EQ(test::kind_of(full), S_IFCHR);
}

TEST_F(FilesCli, OutputToAFifoWithAReaderStaysAFifo) {
  const std::string fifo = dir_.fifo("out.npy");
  std::string received;
  std::thread reader([&] {
    const test::Watchdog watchdog(kLimit);
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) received.append(buffer, n);
    ::close(fd);
  });
  // The command's non-blocking open fails until the reader has the FIFO open; retry till then.
  CliResult r;
  for (int attempt = 0; attempt < 100; ++attempt) {
    r = run_limited(attend({"--out", fifo}));
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader.join();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(parse_npy(received, "received").shape(), (Shape{3, 4}));
  EXPECT_EQ(test::kind_of(fifo), S_IFIFO);
}

TEST_F(FilesCli, OutputThatIsADirectoryIsAUsageError) {
  const std::string folder = dir_.path("folder");
  fs::create_directory(folder);
  expect_error(run_limited(attend({"--out", folder})), 2,
               "--out " + folder + ": is a directory; expected a file name");
  expect_error(run_limited({"train", "--task", "reverse", "--out", folder}), 2,
               "--out " + folder + ": is a directory; expected a file name");
}

TEST_F(FilesCli, OutputThroughASymlinkReplacesItsTarget) {
  fs::create_directory(dir_.path("real"));
  dir_.write("real/o.npy", "old");
  ASSERT_EQ(::symlink("real/o.npy", dir_.path("link.npy").c_str()), 0);
  const CliResult r = run_limited(attend({"--out", dir_.path("link.npy")}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(test::kind_of(dir_.path("link.npy")), S_IFLNK);
  EXPECT_EQ(read_npy(dir_.path("real/o.npy")).shape(), (Shape{3, 4}));
}

// ---- outputs as one set

TEST_F(FilesCli, TwoOutputsNamingOneFileAreAUsageError) {
  // --out a.npy --weights ./a.npy wrote both, and the weights silently replaced the output.
  const std::string a = dir_.path("a.npy"), dotted = (dir_.root() / "." / "a.npy").string();
  expect_error(run_limited(attend({"--out", a, "--weights", dotted})), 2,
               "--out " + a + " and --weights " + dotted +
                   " name the same file; expected a different file for each");
  EXPECT_FALSE(fs::exists(a));
  dir_.write("a.npy", "old");
  ASSERT_EQ(::link(a.c_str(), dir_.path("hard.npy").c_str()), 0);
  ASSERT_EQ(::symlink("a.npy", dir_.path("soft.npy").c_str()), 0);
  expect_error(run_limited(attend({"--out", a, "--lse", dir_.path("hard.npy")})), 2,
               "--out " + a + " and --lse " + dir_.path("hard.npy") +
                   " name the same file; expected a different file for each");
  expect_error(run_limited(attend({"--weights", dir_.path("soft.npy"), "--html", a})), 2,
               "--weights " + dir_.path("soft.npy") + " and --html " + a +
                   " name the same file; expected a different file for each");
  EXPECT_EQ(dir_.read("a.npy"), "old");
}

TEST_F(FilesCli, AFailingLastOutputLeavesNoneOfTheOthers) {
  // --out ok.npy --html missing/r.html wrote ok.npy, then failed on the report.
  const std::string ok = dir_.path("ok.npy"), html = dir_.path("missing/r.html");
  expect_error(run_limited(attend({"--out", ok, "--html", html})), 1,
               "--html " + html + ": the folder " + dir_.path("missing") + " does not exist");
  EXPECT_FALSE(fs::exists(ok));
  // explain checks its three outputs before it loads the model.
  const std::string report = dir_.path("report.html"), png = dir_.path("missing/g.png");
  expect_error(run_limited({"explain", "--html", report, "--png", png}), 1,
               "--png " + png + ": the folder " + dir_.path("missing") + " does not exist");
  EXPECT_FALSE(fs::exists(report));
  EXPECT_FALSE(has_temporary(dir_));
}

// ---- interrupted writes

// Starts qkv with the writer's test pause (core/files.h) and returns its pid.
pid_t start_paused(const std::vector<std::string>& args) {
  std::vector<std::string> env{std::string(kPauseAfterTemporariesEnv) + "=" +
                               std::to_string(kLimit)};
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp, argv;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string binary = testing::qkv_binary();
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

// Signals `pid` once a temporary exists in `dir`; returns its wait status (-1: no temporary
// appeared, or it did not end; it is killed then).
int signal_when_paused(pid_t pid, const test::ScratchDir& dir, int signal_number) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLimit);
  while (!has_temporary(dir) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool paused = has_temporary(dir);
  ::kill(pid, paused ? signal_number : SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return paused ? status : -1;
}

TEST_F(FilesCli, SignalDuringTheWriteRemovesTheTemporaries) {
  for (const int signal_number : {SIGTERM, SIGINT}) {
    const pid_t pid =
        start_paused(attend({"--out", dir_.path("o.npy"), "--weights", dir_.path("w.npy")}));
    ASSERT_GT(pid, 0);
    const int status = signal_when_paused(pid, dir_, signal_number);
    ASSERT_NE(status, -1) << "no temporary appeared while the writer paused";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number)
        << "expected death by signal " << signal_number << ", got status " << status;
    EXPECT_THAT(dir_.names(), ::testing::ElementsAre("k.npy", "q.npy", "v.npy"));
  }
}

TEST_F(FilesCli, KilledWriterLeavesItsTemporarySoTheTestAboveCanFail) {
  // SIGKILL cannot be caught: the temporary stays. This is what the test above would see if the
  // handler were gone.
  const pid_t pid = start_paused(attend({"--out", dir_.path("o.npy")}));
  ASSERT_GT(pid, 0);
  const int status = signal_when_paused(pid, dir_, SIGKILL);
  ASSERT_NE(status, -1);
  EXPECT_TRUE(has_temporary(dir_));
}

}  // namespace
}  // namespace qkv
