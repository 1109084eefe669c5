// qkv/explain.h — a model's attention made visible, the umbrella of explain: a model's run is one
// record, explain::Run (qkv/explain_run.h), made by explain::capture; the readings
// (qkv/explain_readings.h), the terminal and images (qkv/explain_views.h) and the HTML report and
// JSON (qkv/explain_report.h) read it. `qkv explain` and the Python package are built on it. One
// call of qkv::attention explained (`qkv attend`) is qkv/attend.h.
#pragma once

#include "qkv/explain_focus.h"
#include "qkv/explain_readings.h"
#include "qkv/explain_report.h"
#include "qkv/explain_run.h"
#include "qkv/explain_views.h"
#include "qkv/model.h"
#include "qkv/terminal.h"

namespace qkv::explain {

// ---- text for terminals: qkv/terminal.h (core), named here as before ----
using qkv::bar;
using qkv::clip;
using qkv::display_width;
using qkv::fixed;
using qkv::grouped;
using qkv::heatmap_cell;
using qkv::pad_left;
using qkv::pad_right;
using qkv::printable;
using qkv::render;
using qkv::short_number;
using qkv::split_commas;
using qkv::Table;
using qkv::table_row;
using qkv::wrap;

}  // namespace qkv::explain
