#include "options.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "qkv/lines.h"
#include "qkv/threads.h"

namespace qkv::cli {

CLI::Validator finite_number(Bounds bounds) {
  const std::string want = bounds_text(bounds);
  return CLI::Validator(
      [bounds, want](std::string& input) { return number_problem(input, bounds, want); }, want);
}

CLI::Validator integer(IntegerRange range) {
  // No description: the help of each option says its range in its own words.
  return CLI::Validator([range](std::string& input) { return integer_problem(input, range); }, "");
}

CLI::Validator seed_integer() {
  return integer({.lo = 0, .hi = std::numeric_limits<uint64_t>::max()});
}

CLI::Validator thread_count() {
  return integer(
      {.lo = 1, .hi = static_cast<uint64_t>(max_num_threads()), .expected = num_threads_range()});
}

std::string thread_count_help() {
  return "threads, at most " + std::to_string(kThreadsPerCore) +
         " × the cores (default $QKV_NUM_THREADS, else all cores)";
}

namespace {

std::string utf8_text_problem(const std::string& input) {
  const std::string problem = utf8_problem(input);
  return problem.empty()
             ? ""
             : "'" + input + "' is not valid UTF-8 (" + problem + "); expected UTF-8 text";
}

}  // namespace

CLI::Validator text(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& input) -> std::string {
        if (input.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
          return std::string(input.empty() ? "the text is empty" : "the text is only white space") +
                 "; expected " + expected;
        return utf8_text_problem(input);
      },
      "");
}

CLI::Validator one_of(const std::vector<std::string>& words) {
  std::string list;
  for (const std::string& w : words) list += (list.empty() ? "" : ", ") + w;
  return CLI::Validator(
      [words, list](std::string& input) -> std::string {
        if (std::find(words.begin(), words.end(), input) != words.end()) return "";
        if (input.empty()) return "the value is empty; expected one of " + list;
        return "'" + input + "' is not one of " + list + "; expected one of them";
      },
      "");
}

CLI::Validator utf8_text() {
  return CLI::Validator([](std::string& input) { return utf8_text_problem(input); }, "");
}

std::string option_of(std::string_view field, std::string_view value) {
  std::string option = "--" + std::string(field);
  std::replace(option.begin(), option.end(), '_', '-');
  return value.empty() ? option : option + " " + std::string(value);
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_expected_max() == 0) continue;  // a flag: it takes no value
    // A list of choices where the help gives one ("top-left | bottom-right"), else what the help
    // shows after the option: "FILE", "N", "Q.npy", else CLI11's type ("TEXT").
    const std::string& description = option->get_description();
    std::string takes = description.find(" | ") != std::string::npos
                            ? description.substr(0, description.find(':'))
                            : option->get_option_text();
    if (takes.empty()) takes = option->get_type_name().substr(0, option->get_type_name().find(':'));
    if (takes.empty()) takes = "a value";
    option->check(CLI::Validator(
        [takes](std::string& input) {
          return input.empty() ? "the value is empty; expected " + takes : std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*sub);
}

}  // namespace qkv::cli
