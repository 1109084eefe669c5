// explain/call/rows.h — What `qkv attend` computes, and how much memory it takes: the L×S matrices
// (weights, scores, logits) exist only where an output needs them all (--weights, --json, --html)
// or the case is small enough to explain step by step; the text summary of a large case runs the
// reference on the few query rows it shows. So the fused path stays O(L·D) end to end, and anything
// that needs the L×S matrices says how much memory before it starts and refuses past a limit.
#pragma once

#include <cstdint>
#include <string>

#include "explain/call/call.h"

namespace qkv::explain {

// B·Hq·L·S: the attention weights of the case.
int64_t weight_count(const AttentionCall& c);

// (batch, head) pairs, B·Hq.
int64_t head_pairs(const AttentionCall& c);

// Bytes the float64 reference takes beyond the inputs when it keeps every weight, score and logit
// (run_case), and with --json the JSON of them too. Measured (tests/cli/attend_memory_test.cpp).
int64_t reference_bytes(const AttentionCall& c, bool json);

// The first `rows` query rows of flat (batch, head) pair `pair`, as a problem of its own: q
// [rows, Dq], k and v [S, D] of the pair's kv head, and every mask of the whole problem — the
// user's, causal with the whole problem's alignment, key lengths — as one float mask [rows, S]
// (−∞ where hidden). Its reference run gives exactly those rows of the whole run.
AttentionCall first_rows(const AttentionCall& c, int64_t pair, int64_t rows);

}  // namespace qkv::explain
