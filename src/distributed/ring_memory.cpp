// ring_attention_bytes (qkv/distributed.h): the buffers ring_attention.cpp allocates, counted.
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
  const double backward = 6 * block + query_rows * d;
  return saturated_bytes(4.0 * (forward + backward));
}

}  // namespace qkv::distributed
