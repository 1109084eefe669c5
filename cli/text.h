// The terminal text helpers are qkv/terminal.h's (core); the command finds them from qkv::cli
// as qkv::fixed, qkv::pad_right, ...
#pragma once

#include "qkv/explain.h"
#include "qkv/terminal.h"
