// Specification of core/input_file.h: a regular file within its limit is read whole; a FIFO, a
// device, a directory or a socket is refused at once, without blocking and without reading, with
// one line naming the path, what it is and what was expected; a stream is read up to a bound.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/scratch_files.h"
#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

constexpr InputSpec kSpec{.expected = "a regular test file", .max_bytes = 1024};

// The message of the qkv::Error (Kind::invalid_argument) that opening `path` throws; "" if none.
std::string refusal(const std::string& path, const InputSpec& spec = kSpec) {
  try {
    InputFile file(path, spec);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

TEST(InputFile, ReadsARegularFileWhole) {
  const test::ScratchDir dir;
  const std::string bytes = std::string("a\0b\n", 4) + std::string(1000, 'x');
  const std::string path = dir.write("f.bin", bytes);
  const InputFile file(path, kSpec);
  EXPECT_EQ(file.size(), bytes.size());
  EXPECT_EQ(file.read_all(), bytes);
  char middle[3];
  file.read_exactly(1, middle, 3);
  EXPECT_EQ(std::string(middle, 3), std::string("\0b\n", 3));
  EXPECT_EQ(read_input_file(dir.write("empty", ""), kSpec), "");
}

TEST(InputFile, FifoIsRefusedAtOnceNotWaitedOn) {
  // Opening a FIFO that has no writer blocks forever without O_NONBLOCK.
  const test::ScratchDir dir;
  const std::string fifo = dir.fifo("pipe");
  const test::Watchdog watchdog(20);
  EXPECT_EQ(refusal(fifo), fifo + ": is a FIFO (named pipe); expected a regular test file");
}

TEST(InputFile, CharacterDeviceIsRefusedNotReadToTheEnd) {
  const test::Watchdog watchdog(20);
  EXPECT_EQ(refusal("/dev/zero"), "/dev/zero: is a character device; expected a regular test file");
  EXPECT_EQ(refusal("/dev/null"), "/dev/null: is a character device; expected a regular test file");
}

TEST(InputFile, DirectoryIsRefused) {
  const test::ScratchDir dir;
  EXPECT_EQ(refusal(dir.root().string()),
            dir.root().string() + ": is a directory; expected a regular test file");
}

TEST(InputFile, SymlinkToADeviceIsTheDevice) {
  const test::ScratchDir dir;
  const std::string link = dir.path("vocab.txt");
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  EXPECT_EQ(refusal(link), link + ": is a character device; expected a regular test file");
}

TEST(InputFile, SocketIsNamedAsOne) {
  const test::ScratchDir dir;
  const std::string path = dir.path("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(refusal(path), path + ": is a socket; expected a regular test file");
  ::close(fd);
}

TEST(InputFile, LargerThanTheLimitIsRefusedBeforeReading) {
  const test::ScratchDir dir;
  const std::string at_limit = dir.write("at", std::string(1024, 'x'));
  EXPECT_EQ(read_input_file(at_limit, kSpec).size(), 1024u);
  const std::string over = dir.write("over", std::string(1025, 'x'));
  EXPECT_EQ(refusal(over),
            over + ": has 1025 bytes; expected a regular test file of at most 1 KiB");
}

TEST(InputFile, MissingFileSaysWhyItCannotBeOpened) {
  EXPECT_EQ(refusal("/nonexistent/f"), "/nonexistent/f: cannot open: No such file or directory");
  const InputSpec named{.expected = "a regular file", .max_bytes = 10, .noun = "the vocabulary"};
  EXPECT_EQ(refusal("/nonexistent/v", named),
            "/nonexistent/v: cannot open the vocabulary: No such file or directory");
}

TEST(InputFile, ReadingPastTheEndOfAShrunkFileIsAnError) {
  const test::ScratchDir dir;
  const std::string path = dir.write("f", "12345678");
  const InputFile file(path, kSpec);
  ASSERT_EQ(::truncate(path.c_str(), 4), 0);
  char out[8];
  try {
    file.read_exactly(0, out, 8);
    FAIL() << "read_exactly read 8 bytes of a 4-byte file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": ended at byte 4 while 8 were expected"));
  }
}

TEST(ReadStream, ReadsAPipeToItsEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "one\ntwo\n", 8), 8);
  ::close(fds[1]);
  EXPECT_EQ(read_stream(fds[0], "stdin", 8), "one\ntwo\n");
  ::close(fds[0]);
}

TEST(ReadStream, EndlessInputStopsAtTheLimit) {
  // /dev/zero as stdin: without a bound the read ends only when memory does.
  const test::Watchdog watchdog(20);
  const int fd = ::open("/dev/zero", O_RDONLY);
  ASSERT_GE(fd, 0);
  try {
    read_stream(fd, "stdin", uint64_t{1} << 20);
    FAIL() << "read_stream of /dev/zero returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()), "stdin: more than 1 MiB of input; expected at most 1 MiB");
  }
  ::close(fd);
}

TEST(ByteCount, NamesWholeUnits) {
  EXPECT_EQ(byte_count_str(64u << 20), "64 MiB");
  EXPECT_EQ(byte_count_str(uint64_t{16} << 30), "16 GiB");
  EXPECT_EQ(byte_count_str(1024), "1 KiB");
  EXPECT_EQ(byte_count_str(1000), "1000 bytes");
  EXPECT_EQ(byte_count_str(1), "1 byte");
}

TEST(Utf8, FindsTheFirstInvalidByte) {
  constexpr auto npos = std::string_view::npos;
  EXPECT_EQ(invalid_utf8_at(""), npos);
  EXPECT_EQ(invalid_utf8_at("plain ascii"), npos);
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), npos);  // é € 😀
  EXPECT_EQ(invalid_utf8_at("ab\xff"), 2u);            // never a UTF-8 byte
  EXPECT_EQ(invalid_utf8_at("a\x80"), 1u);             // a continuation without a lead
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(invalid_utf8_at("\xe0\x80\xaf"), 0u);      // overlong, three bytes
  EXPECT_EQ(invalid_utf8_at("x\xed\xa0\x80"), 1u);     // a surrogate, U+D800
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(invalid_utf8_at("ok\xc3"), 2u);            // cut short by the end
  EXPECT_EQ(invalid_utf8_at("\xe2\x82x"), 0u);         // cut short by an ASCII byte
}

}  // namespace
}  // namespace qkv
