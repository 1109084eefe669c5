// cli/output.cpp — what the command says of the files it wrote; see output.h.
#include "output.h"

#include <iostream>
#include <string>
#include <string_view>

#include "qkv/files.h"
#include "qkv/tensor.h"
#include "text.h"

namespace qkv::cli {

std::string json_path(const std::string& path) {
  std::string shown;
  std::string_view rest = path;
  for (std::size_t at; (at = invalid_utf8_at(rest)) != std::string_view::npos;) {
    shown.append(rest.substr(0, at)).append("\xEF\xBF\xBD");  // U+FFFD
    rest.remove_prefix(at + 1);
  }
  return shown.append(rest);
}

void report_written(const std::string& path, std::size_t bytes) {
  std::cerr << "wrote " << printable(path) << " (" << (bytes + 1023) / 1024
            << " KB, self-contained: open it in any browser, offline)\n";
}

}  // namespace qkv::cli
