// ring_attention_bytes (qkv/distributed.h): the buffers ring_attention.cpp allocates, counted.
#include "kernels/cpu/flash_common.h"
#include "qkv/distributed.h"
#include "qkv/memory.h"

namespace qkv::distributed {

int64_t ring_attention_bytes(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                             int64_t rows, int64_t largest_block) {
  const double b = static_cast<double>(batch), d = static_cast<double>(head_dim);
  // A packed block holds a block's keys and values (RingShape::block_floats).
  const double block = 2 * b * static_cast<double>(kv_heads * largest_block) * d;
  const double query_rows = b * static_cast<double>(q_heads * rows);
  // Forward: two blocks, the running output and statistics, the result's out, logsumexp and
  // saved softmax (kept for backward). Backward: five blocks, dq, and dk and dv (one block).
  const double forward = 2 * block + 2 * query_rows * d + 5 * query_rows;
  // The fused backward of a block, beside: every query row as its products read it (Q, packed Q
  // and packed dO, D and the visible end: flash_backward.cpp's Rows) and the partial dQ of each
  // key chunk past the first (flash::backward_chunks).
  const int64_t chunks =
      cpu::flash::backward_chunks(batch, q_heads, kv_heads, largest_block, head_dim, rows).count;
  const double kernel = query_rows * (3 * d + 3) + static_cast<double>(chunks - 1) * query_rows * d;
  const double backward = 6 * block + query_rows * d + kernel;
  return saturated_bytes(4.0 * (forward + backward));
}

}  // namespace qkv::distributed
