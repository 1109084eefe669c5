// cli/progress.h — the one-line progress display of the long commands (bench, embed, search,
// train, experiment) is qkv/terminal.h's: Progress, CountProgress, step_counter, rate_and_eta,
// rate_and_time_to_limit, duration_str (found from qkv::cli as qkv::...).
#pragma once

#include "qkv/terminal.h"
