// Texts one a line (qkv/lines.h).
#include "qkv/lines.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

// Texts on stdin: far more than a person pastes, and a bound for /dev/zero or an endless pipe.
constexpr uint64_t kMaxStdinBytes = uint64_t{64} << 20;
// A text file: a million lines of text is about 100 MB.
constexpr InputSpec kTextInput{.expected = "a regular text file, one text a line",
                               .max_bytes = uint64_t{256} << 20,
                               .noun = "the file"};

// "0xff".
std::string hex_byte(char c) {
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(c));
  return byte;
}

}  // namespace

std::vector<std::string> split_lines(std::string_view bytes) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string_view::npos) end = bytes.size();
    std::string line(bytes.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::string utf8_problem(std::string_view text) {
  const std::size_t at = invalid_utf8_at(text);
  if (at == std::string_view::npos) return "";
  return "byte " + std::to_string(at + 1) + " is " + hex_byte(text[at]);
}

void check_utf8_lines(const std::vector<std::string>& lines, const std::string& where) {
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (const std::size_t at = invalid_utf8_at(lines[i]); at != std::string::npos)
      throw Error(where + " " + std::to_string(i + 1) + " is not valid UTF-8 (byte " +
                  std::to_string(at + 1) + " of the line is " + hex_byte(lines[i][at]) +
                  "); expected UTF-8 text");
}

std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args,
                                        const std::string& what) {
  if (!args.empty()) {
    check_utf8_lines(args, "text");
    return args;
  }
  if (::isatty(STDIN_FILENO) == 1)
    throw Error("no " + what + " given; pass them as arguments or one a line on stdin");
  std::vector<std::string> lines = split_lines(read_stream(STDIN_FILENO, "stdin", kMaxStdinBytes));
  if (lines.empty()) throw Error("stdin is empty; expected " + what + ", one a line");
  check_utf8_lines(lines, "stdin line");
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find_first_not_of(" \t\f\v") == std::string::npos)
      throw Error("stdin line " + std::to_string(i + 1) + " is " +
                  (lines[i].empty() ? "empty" : "only white space") + "; expected " + what +
                  ", one a line");
  return lines;
}

std::vector<std::string> read_lines(const std::string& source, const std::string& path) {
  std::string bytes;
  try {
    bytes = read_input_file(path, kTextInput);
  } catch (const Error& e) {
    throw Error(source + " " + e.what(), e.kind());
  }
  std::vector<std::string> all = split_lines(bytes);
  check_utf8_lines(all, source + " " + path + " line");
  std::vector<std::string> lines;
  for (std::string& line : all)
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(std::move(line));
  if (lines.empty())
    throw Error(source + " " + path + " has no non-empty lines; expected one text a line");
  return lines;
}

int64_t texts_bytes(const std::vector<std::string>& texts) {
  int64_t bytes = 0;
  for (const std::string& t : texts) bytes += static_cast<int64_t>(sizeof(std::string) + t.size());
  return bytes;
}

int64_t longest_text(const std::vector<std::string>& texts) {
  std::size_t longest = 0;
  for (const std::string& t : texts) longest = std::max(longest, t.size());
  return static_cast<int64_t>(longest);
}

}  // namespace qkv
