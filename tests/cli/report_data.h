// tests/cli/report_data.h — the JSON an HTML report embeds (<script id="data">), for the tests that
// check a report's numbers without a browser.
#pragma once

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace qkv::testing {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The page's data block, parsed; throws when the page has none.
inline nlohmann::json report_data(const std::string& page) {
  const std::string open = "<script id=\"data\" type=\"application/json\">";
  const std::size_t begin = page.find(open);
  if (begin == std::string::npos) throw std::runtime_error("the page has no data block");
  const std::size_t end = page.find("</script>", begin);
  return nlohmann::json::parse(page.substr(begin + open.size(), end - begin - open.size()));
}

}  // namespace qkv::testing
