// cli/output.cpp — what the command says of the files it wrote; see output.h.
#include "output.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>

#include "qkv/files.h"
#include "qkv/tensor.h"
#include "qkv/terminal.h"

namespace qkv::cli {

void note(const std::string& line) {
  if (!line.empty()) std::cerr << "qkv: note: " << line << "\n";
}

void report_written(const std::string& path, std::size_t bytes) {
  std::cerr << "wrote " << printable(path) << " (" << (bytes + 1023) / 1024
            << " KB, self-contained: open it in any browser, offline)\n";
}

void write_and_say(const std::vector<std::pair<OutputPath, std::string>>& outputs,
                   const std::vector<std::string_view>& said_elsewhere) {
  write_outputs(outputs);
  for (const auto& [output, bytes] : outputs)
    if (std::find(said_elsewhere.begin(), said_elsewhere.end(), output.option) !=
        said_elsewhere.end())
      continue;
    else if (output.option == "--html")
      report_written(output.path, bytes.size());
    else
      std::cerr << "wrote " << printable(output.path) << " (" << (bytes.size() + 1023) / 1024
                << " KB)\n";
}

}  // namespace qkv::cli
