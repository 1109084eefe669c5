// explain/markup.h — text made safe inside HTML or SVG markup (element content and quoted
// attributes), for the pages and images qkv writes.
#pragma once

#include <string>
#include <string_view>

namespace qkv::explain {

inline std::string escape_markup(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

}  // namespace qkv::explain
