// Global positions of the ranks' rows, and the parts of a (query block, key block) pair that a
// causal mask leaves visible. No MPI here: plain arithmetic, tested on its own.
#pragma once

#include <cstdint>
#include <vector>

#include "qkv/distributed.h"

namespace qkv::distributed {

// Local query rows [q0, q0 + rows) against local key rows [k0, k0 + keys) of a block: every key
// visible (diagonal false), or top-left causal from their first rows on, which then hold the same
// global position (diagonal true).
struct BlockPiece {
  int64_t q0 = 0, rows = 0, k0 = 0, keys = 0;
  bool diagonal = false;
};

// The pieces that cover every visible (query, key) pair of a query block and a key block once;
// pairs in no piece are masked. Without causal: the whole block pair, when neither is empty.
std::vector<BlockPiece> visible_pieces(const std::vector<RingSegment>& queries,
                                       const std::vector<RingSegment>& keys, bool causal);

}  // namespace qkv::distributed
