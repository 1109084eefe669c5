// explain/report/html/assets.h — the report page's parts, compiled in from the files beside this
// one by cmake/embed_text.cmake: body.html (the views' skeleton), report.css, report.js.
#pragma once

#include <string_view>

namespace qkv::explain {

std::string_view report_body();
std::string_view report_css();
std::string_view report_js();

}  // namespace qkv::explain
