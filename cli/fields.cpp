#include "fields.h"

#include <algorithm>

namespace qkv::cli {

std::string option_of(std::string_view field, std::string_view value) {
  std::string option = "--" + std::string(field);
  std::replace(option.begin(), option.end(), '_', '-');
  return value.empty() ? option : option + " " + std::string(value);
}

}  // namespace qkv::cli
