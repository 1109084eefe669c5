// What `qkv attend` computes, and how much memory it takes: the L×S matrices (weights, scores,
// logits) exist only where an output needs them all (--weights, --json, --html) or the case is
// small enough to explain step by step; the text summary of a large case runs the reference on the
// few query rows it shows. So the fused path stays O(L·D) end to end, and anything that needs the
// L×S matrices says how much memory before it starts and refuses past a limit.
#pragma once

#include <cstdint>
#include <string>

#include "attend_case.h"

namespace qkv::cli {

// B·Hq·L·S: the attention weights of the case.
int64_t weight_count(const AttendCase& c);

// (batch, head) pairs, B·Hq.
int64_t head_pairs(const AttendCase& c);

// Bytes the float64 reference takes beyond the inputs when it keeps every weight, score and logit
// (run_case), and with --json the JSON of them too. Measured (tests/cli/attend_memory_test.cpp).
int64_t reference_bytes(const AttendCase& c, bool json);

// The first `rows` query rows of flat (batch, head) pair `pair`, as a problem of its own: q
// [rows, Dq], k and v [S, D] of the pair's kv head, and every mask of the whole problem — the
// user's, causal with the whole problem's alignment, key lengths — as one float mask [rows, S]
// (−∞ where hidden). Its reference run gives exactly those rows of the whole run.
AttendCase first_rows(const AttendCase& c, int64_t pair, int64_t rows);

// "8G", "512M", "1.5G", "4096K", or bytes; throws qkv::Error naming `option` otherwise.
int64_t parse_bytes(const std::string& option, const std::string& text);
// Half the machine's physical memory: the default --memory-limit.
int64_t default_memory_limit();
// "9.7 GiB", "312 MiB", "4 KiB".
std::string bytes_str(int64_t bytes);

}  // namespace qkv::cli
