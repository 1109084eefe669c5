// qkv/distributed.h — exact attention across processes: ring attention over MPI (issue 17).
//
// Sequence parallelism (Ring Attention, Liu et al. 2023): each of P ranks holds a block of the
// sequence — its queries and the keys and values at the same positions. The key/value blocks
// travel around the ring (rank r sends to r + 1 and receives from r − 1, the next block in flight
// while the fused kernel works on the current one); each rank merges its partial results by their
// softmax statistics (logsumexp), exactly: the result is softmax(Q Kᵀ · scale) V over the whole
// sequence, up to float32 rounding. The backward passes dK and dV around the ring with their
// blocks, back to the rank that owns them; dQ stays where it is.
//
// Layout: every rank passes q [B, Hq, L_r, D], k [B, Hkv, S_r, D], v [B, Hkv, S_r, Dv], float32,
// with the same B, Hq, Hkv, D and Dv on every rank; L_r and S_r may differ between ranks (uneven
// blocks). Query head h reads key/value head h / (Hq / Hkv) (grouped-query attention). Which
// global positions a rank's rows hold is the RingLayout: `contiguous` (rank r holds the r-th
// block) or `zigzag` (the sequence in 2P chunks; rank r holds chunks r and 2P − 1 − r, so that
// under a causal mask every rank has the same share of the triangle). ring_positions() says it.
// Every rank must call these functions together (they are collective over `comm`); an invalid
// input on any rank is a qkv::Error on every rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "qkv/attention.h"
#include "qkv/tensor.h"

namespace qkv::distributed {

enum class RingLayout { contiguous, zigzag };

struct RingOptions {
  std::optional<double> scale;  // any finite value; empty → 1/√D
  bool causal = false;          // over global positions: query i sees keys j ≤ i (top-left)
  RingLayout layout = RingLayout::contiguous;
  int num_threads = 0;  // the kernels' threads per rank; 0: $QKV_NUM_THREADS, else all cores
};

// What one call moved and where its time went, on this rank.
struct RingTraffic {
  int64_t bytes_sent = 0, bytes_received = 0, messages = 0;
  double compute_seconds = 0;  // inside the fused kernels and the merges
  double wait_seconds = 0;     // blocked in MPI_Waitall: communication not hidden by compute
};

struct RingResult {
  Tensor out;        // [B, Hq, L_r, Dv]
  Tensor logsumexp;  // [B, Hq, L_r], natural log over the whole sequence; −∞ for a row that sees
                     // no key
  // Each row's global softmax as the fused kernels form it (AttentionResult::saved_max/sum):
  // what ring_attention_backward needs beside `out`.
  Tensor saved_max, saved_sum;
  // What this rank's forward was computed from (its q, k, v, the scale and causal) and its
  // layout: ring_attention_backward refuses, on every rank, a forward of other inputs or options
  // (as attention_backward does, qkv/attention.h).
  ForwardFingerprint fingerprint;
  RingLayout layout = RingLayout::contiguous;
  RingTraffic traffic;
};

struct RingGrads {
  Tensor dq, dk, dv;  // shaped like this rank's q, k, v
  RingTraffic traffic;
};

RingResult ring_attention(MPI_Comm comm, const Tensor& q, const Tensor& k, const Tensor& v,
                          const RingOptions& options = {});

// Gradients of a loss given dout = ∂loss/∂out for this rank's rows, and what ring_attention
// returned for these very inputs and options (a forward of others, on any rank, is a qkv::Error on
// every rank).
RingGrads ring_attention_backward(MPI_Comm comm, const Tensor& dout, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const RingResult& forward,
                                  const RingOptions& options = {});

// What ring_attention and then ring_attention_backward allocate on one rank beyond their inputs,
// at the backward's peak with the forward's result kept, in bytes (qkv/memory.h): the rank's
// out, dq and row statistics, and the packed key/value blocks — two in flight forward; five
// backward (the block computed, the one arriving, and the travelling dK/dV of both with the
// incoming one) — plus its own dk and dv. `rows`: this rank's query rows; `largest_block`: the
// most key/value rows any rank holds.
int64_t ring_attention_bytes(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                             int64_t rows, int64_t largest_block);

// Global positions, as consecutive runs of a rank's rows: local rows [local, local + length) hold
// global positions [global, global + length). `lengths` holds every rank's row count.
struct RingSegment {
  int64_t local = 0, global = 0, length = 0;
};
std::vector<RingSegment> ring_segments(RingLayout layout, const std::vector<int64_t>& lengths,
                                       int rank);
// The global position of each of rank `rank`'s rows.
std::vector<int64_t> ring_positions(RingLayout layout, const std::vector<int64_t>& lengths,
                                    int rank);

}  // namespace qkv::distributed
