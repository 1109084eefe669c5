// The ring's plumbing: checking every rank's inputs together, and one non-blocking exchange with
// the neighbours (send to rank + 1, receive from rank − 1) that a step overlaps with its compute.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/ring_block.h"
#include "qkv/distributed.h"

namespace qkv::distributed {

struct RingSetup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  RingShape shape;
  std::vector<int64_t> q_lengths, k_lengths;  // every rank's L_r and S_r
  int64_t max_block_floats = 0;               // the largest key/value block, packed
  int next() const { return (rank + 1) % size; }
  int previous() const { return (rank + size - 1) % size; }
  // The rank whose key/value block this rank holds at step t.
  int owner_at(int t) const { return ((rank - t) % size + size) % size; }
};

// Checks this rank's inputs (and, for the backward, that `forward` was computed from them),
// gathers every rank's shapes and checks that they agree: a qkv::Error on every rank when any is
// wrong (collective, so that no rank waits for one that threw).
RingSetup ring_setup(MPI_Comm comm, const char* who, const Tensor& q, const Tensor& k,
                     const Tensor& v, const RingOptions& options, const Tensor* dout = nullptr,
                     const RingResult* forward = nullptr);

// The fingerprint of this rank's inputs as RingResult records it.
ForwardFingerprint ring_fingerprint(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const RingOptions& options);

// A step's messages: posted by send_next / receive_previous, completed by wait().
class RingExchange {
 public:
  RingExchange(const RingSetup& setup, RingTraffic& traffic) : setup_(setup), traffic_(traffic) {}
  void send_next(const float* data, int64_t floats, int tag);
  void receive_previous(float* data, int64_t floats, int tag);
  void wait();  // every posted request; its time counts as RingTraffic::wait_seconds
  void test();  // lets MPI move the posted messages along (MPI_Testall), without waiting

 private:
  const RingSetup& setup_;
  RingTraffic& traffic_;
  std::vector<MPI_Request> requests_;
};

// k [B, Hkv, S, Dk] then v [B, Hkv, S, Dv], contiguous, into `to`; and back.
void pack_block(const Tensor& k, const Tensor& v, float* to);
void unpack_block(const float* from, Tensor& k, Tensor& v);

}  // namespace qkv::distributed
