#include "written.h"

#include <algorithm>
#include <iostream>

#include "output.h"
#include "qkv/terminal.h"

namespace qkv::cli {

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
