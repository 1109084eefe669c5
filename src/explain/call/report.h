// explain/call/report.h — `qkv attend --html`: one call of attention (or every run of a worked
// example) as the HTML report's blocks — one block per run and batch entry, its heads side by side.
#pragma once

#include <string>
#include <vector>

#include "explain/call/call.h"
#include "explain/report/report.h"

namespace qkv::explain {

Report report_of(const std::string& title, const std::vector<std::string>& story,
                 const std::vector<AttentionCall>& cases,
                 const std::vector<AttentionResult>& results);

}  // namespace qkv::explain
