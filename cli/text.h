// The terminal text helpers live in the explain layer (src/explain/terminal/text.cpp, declared in
// qkv/explain.h); the command uses them under its own namespace.
#pragma once

#include "qkv/explain.h"

namespace qkv::cli {
using explain::bar;
using explain::clip;
using explain::display_width;
using explain::fixed;
using explain::grouped;
using explain::pad_left;
using explain::pad_right;
using explain::printable;
using explain::render;
using explain::short_number;
using explain::split_commas;
using explain::Table;
using explain::table_row;
using explain::wrap;
}  // namespace qkv::cli
