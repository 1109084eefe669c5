// Checks shared by the subcommands' options, run while the command line is parsed, so that a
// wrong value is a usage error (exit 2) naming the option, the value as typed and what was
// expected, before any work:
//   "--temperature: nan is not a number; expected a number in [1e-06, 1e+06]"
//   "--steps: 1e9 is not a decimal integer; expected 1 to 10^8"
//   "--key-labels: '\xff,b' is not valid UTF-8 (byte 1 is 0xff); expected UTF-8 text"
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/parse.h"

namespace qkv::cli {

// A finite number within `bounds` (default: any finite number); qkv::number_problem.
CLI::Validator finite_number(Bounds bounds = {});

// Every integer option of every subcommand takes this, added with transform(): decimal digits
// only, with a leading '-' where the range has negatives, and within the range. CLI11's own
// conversion reads "010" as octal 8 and "0x10" as 16, wraps "-1" and clamps
// "18446744073709551616" to the type's maximum without a word, and leaks its own wording
// ("Could not convert: --steps = 1e9"); this refuses all but the first, which it rewrites as
// decimal 10:
//   "--steps: 1e9 is not a decimal integer; expected 1 to 10^8"
//   "--threads: 18446744073709551616 is out of range; expected 1 to 8 (4 × this machine's ...)"
CLI::Validator integer(IntegerRange range);

// A seed: integer(0 to 2⁶⁴ − 1).
CLI::Validator seed_integer();

// A thread count: an integer from 1 to 4 × the machine's cores (qkv/threads.h), the same bound as
// $QKV_NUM_THREADS and the library's num_threads. Every command's --threads takes this.
CLI::Validator thread_count();
// The help of a --threads option: "threads, at most 4 × the cores (default $QKV_NUM_THREADS, else
// all cores)".
std::string thread_count_help();

// A text the command reads (a sentence, a prompt, a query, a system message): not empty nor only
// white space, and valid UTF-8 (it reaches --json and --html, and the tokenizers, whose own
// errors name neither the option nor the text). `expected` ends the message for a blank one:
//   "a: the text is empty; expected a sentence"
CLI::Validator text(const std::string& expected);
// One of a few words, as typed: "--weights: 'f16' is not one of file, float32; expected one of
// them".
CLI::Validator one_of(const std::vector<std::string>& words);

// Text that may be anything but must be valid UTF-8 (labels).
CLI::Validator utf8_text();

// The library's fields as the command spells them: its errors name the fields of its arguments
// (qkv::FieldError: key_lengths, input); the command shows each as its option, "--" and the field
// with '_' as '-', then " value" where the message suggests a setting ({score=general}: "--score
// general"). qkv train renames a few (flag_of in train/train.h: batch_size is --batch).
std::string option_of(std::string_view field, std::string_view value = {});

// Adds to every option of `app` and of its subcommands, at any depth, that takes a value, a check
// that the value is not empty: an empty value is never a choice of its own (a path '' wrote
// nothing, --steps '' and --model '' were the defaults, --causal '' no mask, --token '' the
// default focus), so it is a usage error that names the option and what it takes:
//   "--html: the value is empty; expected FILE"
// An option's own validators run first, so those that say more about it (integer(), text())
// speak for it. cli/main.cpp calls this once every subcommand is added.
void refuse_empty_values(CLI::App& app);

}  // namespace qkv::cli
