// Inline matrices: JSON nested lists → a tensor, with one-line errors that point at the entry.
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "qkv/attend.h"
#include "qkv/json.h"

namespace qkv::explain {

namespace {

using nlohmann::json;

// Inline matrices are for numbers a person types; .npy files are for larger inputs. (Linux caps
// one argument at 128 KiB anyway, MAX_ARG_STRLEN, so a larger limit could never be reached.)
constexpr std::size_t kMaxInlineBytes = std::size_t{64} << 10;
// [H, L, D] is the deepest form the .npy path takes without a batch; [B, H, L, D] needs a file.
constexpr std::size_t kMaxInlineDepth = 3;

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw FieldError(field, "{" + field + "} inline matrix " + FieldError::literal(what) +
                              "; expected rows of numbers in JSON, e.g. \"[[1, 0], [0, 1]]\"");
}

std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "[1][2]": where an entry is, for messages.
std::string at_index(const std::vector<std::size_t>& index) {
  std::string s;
  for (std::size_t i : index) s += "[" + std::to_string(i) + "]";
  return s;
}

struct Walk {
  const std::string& field;
  InlineUse use;
  Shape shape;  // taken from the first entry at each depth
  std::vector<double> values;
  int bools = 0, numbers = 0;
  std::vector<std::size_t> index;

  // Checks that `x`, found at depth index.size(), has the shape of the first entry, then flattens.
  void visit(const json& x) {
    const std::size_t depth = index.size();
    if (depth < shape.size()) {
      if (!x.is_array())
        fail(field, "has a " + std::string(x.type_name()) + " at " + at_index(index) +
                        " where a list of " + std::to_string(shape[depth]) + " was");
      if (static_cast<int64_t>(x.size()) != shape[depth])
        fail(field, "is ragged: " + (index.empty() ? std::string("the list") : at_index(index)) +
                        " has " + std::to_string(x.size()) + " entries but the first has " +
                        std::to_string(shape[depth]));
      for (std::size_t i = 0; i < x.size(); ++i) {
        index.push_back(i);
        visit(x[i]);
        index.pop_back();
      }
      return;
    }
    if (x.is_boolean() && use == InlineUse::mask) {
      ++bools;
      values.push_back(x.get<bool>() ? 1 : 0);
    } else if (x.is_number()) {
      ++numbers;
      const double v = x.get<double>();
      // The parser refuses 1e999; this keeps any ∞ it might let through from reaching attention.
      if (!std::isfinite(v))
        fail(field, "has " + at_index(index) + " beyond float64's range (±1.8e308)");
      values.push_back(v);
    } else {
      fail(field, "has a " + std::string(x.type_name()) + " at " + at_index(index) +
                      (x.is_array() ? " where a number was (rows nest deeper than the first)"
                                    : " where a number was"));
    }
    if (bools > 0 && numbers > 0)
      fail(field, "mixes true/false with numbers (at " + at_index(index) +
                      "); a mask is all bool (may attend) or all numbers (added)");
  }
};

}  // namespace

bool is_inline_matrix(const std::string& argument) {
  const std::size_t first = argument.find_first_not_of(" \t\n\r");
  return first != std::string::npos && argument[first] == '[';
}

std::string shown_argument(const std::string& argument) {
  if (!is_inline_matrix(argument) || argument.size() <= 40) return argument;
  return argument.substr(0, 37) + "...";
}

Tensor parse_inline_matrix(const std::string& field, const std::string& text, InlineUse use) {
  if (text.size() > kMaxInlineBytes)
    fail(field, "is " + grouped(static_cast<int64_t>(text.size())) +
                    " characters, over the limit of " +
                    grouped(static_cast<int64_t>(kMaxInlineBytes)) + " (use a .npy file)");
  const std::string low = lowered(text);
  if (low.find("nan") != std::string::npos || low.find("inf") != std::string::npos)
    fail(field, "has NaN or Infinity, which JSON cannot hold (a .npy file can)");
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    // In a person's words (where it went wrong), not the parser's states.
    if (e.reason() == JsonError::Reason::too_deep)
      fail(field, "nests more than " + std::to_string(kMaxJsonDepth) +
                      " lists deep; at most 3 ([H, L, D]; [B, H, L, D] needs a .npy file)");
    if (e.reason() == JsonError::Reason::out_of_range)  // e.g. 1e999
      fail(field, "has a number beyond float64's range (±1.8e308)");
    fail(field, "is not valid JSON (at character " + std::to_string(e.byte()) + ")");
  }
  Walk walk{field, use};
  // The depth first, then emptiness: an empty list 20,000 lists down is one short message about
  // the depth, not 20,000 "[0]" (parse_json bounds the depth anyway).
  std::size_t depth = 0;
  const json* empty = nullptr;
  for (const json* x = &j; x->is_array(); x = &(*x)[0]) {
    ++depth;
    if (x->empty()) {
      empty = x;
      break;
    }
    walk.shape.push_back(static_cast<int64_t>(x->size()));
  }
  if (depth == 0) fail(field, "is a " + std::string(j.type_name()) + ", not a list");
  if (depth > kMaxInlineDepth)
    fail(field, "nests " + std::to_string(depth) +
                    " lists deep; at most 3 ([H, L, D]; [B, H, L, D] needs a .npy file)");
  if (empty != nullptr)
    fail(field, "has an empty list" +
                    (walk.shape.empty()
                         ? std::string()
                         : " at " + at_index(std::vector<std::size_t>(walk.shape.size(), 0))));
  walk.visit(j);
  Shape shape = walk.shape;
  if (shape.size() == 1 && use != InlineUse::param) shape.insert(shape.begin(), 1);  // one row
  if (walk.bools == 0) return Tensor::from(shape, walk.values);
  Tensor mask(shape, DType::b8);
  bool* out = mask.data<bool>();
  for (std::size_t i = 0; i < walk.values.size(); ++i) out[i] = walk.values[i] != 0;
  return mask;
}

}  // namespace qkv::explain
