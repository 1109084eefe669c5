// One rank's work on one key/value block: the fused kernels run on each visible piece, and the
// piece's softmax merged into the rank's running one (forward), or its gradients added (backward).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "distributed/ring_layout.h"
#include "kernels/cpu/flash_attention.h"

namespace qkv::distributed {

// Shapes of one rank's problem. q [B, Hq, L, Dk] is this rank's; a key/value block is packed as
// k [B, Hkv, S, Dk] then v [B, Hkv, S, Dv], contiguous, S its owner's row count.
struct RingShape {
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, Dk = 0, Dv = 0;
  float scale = 1;
  int threads = 1;
  int64_t block_floats(int64_t S) const { return B * Hkv * S * (Dk + Dv); }
};

// The running softmax of this rank's rows over the blocks seen so far, in the fused kernels' units
// (cpu::SoftmaxStats): out is normalized by sum, max is −∞ and sum 0 until a row sees a key.
struct RunningSoftmax {
  std::vector<float> out, max, sum;  // [B, Hq, L, Dv], [B, Hq, L], [B, Hq, L]
  explicit RunningSoftmax(const RingShape& s);
};

// Natural-log units per unit of RunningSoftmax::max: the kernels keep raw scores q·k where they
// can (kernels/cpu/flash_common.h), so lse = unit·max + log sum.
double max_unit(const RingShape& s);

// Attention of this rank's queries `q` (contiguous [B, Hq, L, Dk]) to the block `kv` of S rows,
// over `pieces`, merged into `running`: out ← (a·out + c·out_b) / (a + c) with a = sum·e^{u(max −
// m)}, c = sum_b·e^{u(max_b − m)}, m = max(max, max_b) (Milakov & Gimelshein 2018, the online
// softmax).
// `progress` runs between chunks of query rows: MPI moves a message only inside MPI calls (on one
// machine OpenMPI copies a large one when the receiver's library next runs), so the step's
// exchange is tested there to travel during the compute rather than after it.
void attend_block(const RingShape& s, const float* q, const float* kv, int64_t S,
                  const std::vector<BlockPiece>& pieces, RunningSoftmax& running,
                  const std::function<void()>& progress);

// The block's gradients given the global forward (out, max, sum: RunningSoftmax's final state) and
// dout, all contiguous over this rank's rows: dq [B, Hq, L, Dk] += this block's part; the block's
// dk then dv, packed like kv, += this rank's part.
void attend_block_backward(const RingShape& s, const float* q, const float* kv, int64_t S,
                           const std::vector<BlockPiece>& pieces, const RunningSoftmax& forward,
                           const float* dout, float* dq, float* dkv,
                           const std::function<void()>& progress);

}  // namespace qkv::distributed
