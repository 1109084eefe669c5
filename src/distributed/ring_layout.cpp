// Which global positions each rank's rows hold, and which (query, key) block pairs a causal mask
// leaves visible.
#include "distributed/ring_layout.h"

#include <algorithm>

namespace qkv::distributed {

std::vector<RingSegment> ring_segments(RingLayout layout, const std::vector<int64_t>& lengths,
                                       int rank) {
  const int P = static_cast<int>(lengths.size());
  if (rank < 0 || rank >= P)
    throw Error("ring_segments: rank " + std::to_string(rank) + " of " + std::to_string(P) +
                " ranks; expected 0 ≤ rank < " + std::to_string(P));
  if (layout == RingLayout::contiguous) {
    int64_t start = 0;
    for (int r = 0; r < rank; ++r) start += lengths[r];
    return {{0, start, lengths[rank]}};
  }
  // Zig-zag (Brandon et al. 2023, "Striped Attention"'s zig-zag variant): 2P chunks; chunk c < P is
  // the first half of rank c's rows (the larger half when odd), chunk 2P − 1 − c its second half.
  auto chunk_length = [&](int c) {
    const int owner = c < P ? c : 2 * P - 1 - c;
    const int64_t first = (lengths[owner] + 1) / 2;
    return c < P ? first : lengths[owner] - first;
  };
  std::vector<RingSegment> segments;
  int64_t start = 0;
  for (int c = 0; c < 2 * P; ++c) {
    if (c == rank) segments.push_back({0, start, chunk_length(c)});
    if (c == 2 * P - 1 - rank) segments.push_back({chunk_length(rank), start, chunk_length(c)});
    start += chunk_length(c);
  }
  return segments;
}

std::vector<int64_t> ring_positions(RingLayout layout, const std::vector<int64_t>& lengths,
                                    int rank) {
  std::vector<int64_t> positions;
  for (const RingSegment& s : ring_segments(layout, lengths, rank))
    for (int64_t i = 0; i < s.length; ++i) positions.push_back(s.global + i);
  return positions;
}

std::vector<BlockPiece> visible_pieces(const std::vector<RingSegment>& queries,
                                       const std::vector<RingSegment>& keys, bool causal) {
  int64_t rows = 0, cols = 0;
  for (const RingSegment& s : queries) rows += s.length;
  for (const RingSegment& s : keys) cols += s.length;
  if (!causal) {
    if (rows == 0 || cols == 0) return {};
    return {{0, rows, 0, cols, false}};
  }
  // Query i sees key j ≤ i. Of a key run [ks, ke) and a query run [qs, qe): keys below qs are seen
  // by every query (a full piece); keys from k0 = max(ks, qs) on are seen by the queries from k0
  // on, as top-left causal attention of positions k0.. against k0.. (a diagonal piece); queries
  // below k0 see none of them, nor does any query see a key at qe or beyond.
  std::vector<BlockPiece> pieces;
  for (const RingSegment& q : queries)
    for (const RingSegment& k : keys) {
      const int64_t qs = q.global, qe = q.global + q.length;
      const int64_t ks = k.global, ke = k.global + k.length;
      const int64_t full_end = std::min(ke, qs);
      if (q.length > 0 && full_end > ks)
        pieces.push_back({q.local, q.length, k.local, full_end - ks, false});
      const int64_t k0 = std::max(ks, qs), k_end = std::min(ke, qe);
      if (k0 < k_end)
        pieces.push_back({q.local + (k0 - qs), qe - k0, k.local + (k0 - ks), k_end - k0, true});
    }
  return pieces;
}

}  // namespace qkv::distributed
