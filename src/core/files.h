// Writing output files so that an error never leaves a half-written or partial set behind.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace qkv {

// Writes every (path, bytes) pair: first all to temporary files beside their paths, then renames
// them into place. On any failure the temporary files are removed and a qkv::Error
// (Kind::runtime) names the path that failed; no path of the set is touched before all are ready.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace qkv
