// qkv/lines.h — texts as a program is given them: arguments, or one a line from a file or stdin.
// Every line is checked to be UTF-8 where the file and the line are still known: a tokenizer that
// finds a bad byte later knows neither.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

// One entry a line: \n ends a line, a \r before it is dropped, a last line needs no \n.
std::vector<std::string> split_lines(std::string_view bytes);

// What is wrong with `text` as UTF-8, "" when nothing: "byte 7 is 0xff" (1-based).
std::string utf8_problem(std::string_view text);

// Throws qkv::Error (Kind::invalid_argument) at the first line that is not UTF-8; `where` names
// the lines: "--corpus docs.txt line 3 is not valid UTF-8 (byte 7 of the line is 0xff); expected
// UTF-8 text".
void check_utf8_lines(const std::vector<std::string>& lines, const std::string& where);

// The texts given as arguments, else one text per line of stdin (read with a bound of 64 MiB, for
// /dev/zero or an endless pipe). `what` names them in errors ("texts"); a terminal on stdin, an
// empty stdin or a blank line is an error (a blank line skipped would shift every later row of
// the output away from its line).
std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args,
                                        const std::string& what);

// A text file, one entry a line, empty lines skipped (at most 256 MiB); errors start with
// `source` ("--corpus") and the path.
std::vector<std::string> read_lines(const std::string& source, const std::string& path);

// Bytes `texts` hold in memory: their characters and each string's own object.
int64_t texts_bytes(const std::vector<std::string>& texts);
// The longest text's bytes.
int64_t longest_text(const std::vector<std::string>& texts);

}  // namespace qkv
