// Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers"), forward and
// backward, on MPI. Step t of P: rank r holds the key/value block of rank r − t; it posts the send
// of that block to r + 1 and the receive of the next from r − 1, then computes on the block it
// holds while they travel.
#include <algorithm>
#include <cmath>
#include <limits>

#include "distributed/ring_comm.h"

namespace qkv::distributed {
namespace {

constexpr int kBlockTag = 1701, kGradTag = 1702;

// The rows of `setup.rank` against the block of `owner`.
std::vector<BlockPiece> pieces_of(const RingSetup& s, const RingOptions& o, int owner) {
  return visible_pieces(ring_segments(o.layout, s.q_lengths, s.rank),
                        ring_segments(o.layout, s.k_lengths, owner), o.causal);
}

Tensor tensor_of(Shape shape, const std::vector<float>& values) {
  return Tensor::from(std::move(shape), values);
}

}  // namespace

RingResult ring_attention(MPI_Comm comm, const Tensor& q, const Tensor& k, const Tensor& v,
                          const RingOptions& o) {
  const RingSetup s = ring_setup(comm, "ring_attention", q, k, v, o);
  const RingShape& sh = s.shape;
  const Tensor qc = q.contiguous();
  RingResult r;
  std::vector<float> current(s.max_block_floats), next(s.max_block_floats);
  pack_block(k, v, current.data());
  RunningSoftmax running(sh);
  for (int t = 0; t < s.size; ++t) {
    const int owner = s.owner_at(t);
    const int64_t S = s.k_lengths[owner];
    RingExchange exchange(s, r.traffic);
    if (t + 1 < s.size) {
      exchange.send_next(current.data(), sh.block_floats(S), kBlockTag);
      exchange.receive_previous(next.data(), sh.block_floats(s.k_lengths[s.owner_at(t + 1)]),
                                kBlockTag);
    }
    const double start = MPI_Wtime();
    attend_block(sh, qc.data<float>(), current.data(), S, pieces_of(s, o, owner), running,
                 [&] { exchange.test(); });
    r.traffic.compute_seconds += MPI_Wtime() - start;
    exchange.wait();
    std::swap(current, next);
  }
  const Shape rows{sh.B, sh.Hq, sh.L};
  r.out = tensor_of({sh.B, sh.Hq, sh.L, sh.Dv}, running.out);
  r.saved_max = tensor_of(rows, running.max);
  r.saved_sum = tensor_of(rows, running.sum);
  r.fingerprint = ring_fingerprint(q, k, v, o);
  r.layout = o.layout;
  const double u = max_unit(sh);
  r.logsumexp = Tensor(rows, DType::f32);
  for (size_t i = 0; i < running.max.size(); ++i) {
    const float m = running.max[i];
    r.logsumexp.data<float>()[i] = m == -std::numeric_limits<float>::infinity()
                                       ? m
                                       : static_cast<float>(u * m + std::log(running.sum[i]));
  }
  return r;
}

// The key/value block and its gradient travel together: at step t rank r receives the block of
// r − t − 1 and, from r − 1, the gradient of the block it holds now (what ranks r − t .. r − 1
// added to it); it adds its own part and sends the sum on. After P steps each gradient is complete
// and one hop from its owner, which a last message closes.
RingGrads ring_attention_backward(MPI_Comm comm, const Tensor& dout, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const RingResult& forward,
                                  const RingOptions& o) {
  const RingSetup s = ring_setup(comm, "ring_attention_backward", q, k, v, o, &dout, &forward);
  const RingShape& sh = s.shape;
  const Tensor qc = q.contiguous(), doutc = dout.to(DType::f32);
  RunningSoftmax global(sh);
  const Tensor out = forward.out.contiguous(), m = forward.saved_max.contiguous(),
               l = forward.saved_sum.contiguous();
  std::copy(out.data<float>(), out.data<float>() + out.numel(), global.out.begin());
  std::copy(m.data<float>(), m.data<float>() + m.numel(), global.max.begin());
  std::copy(l.data<float>(), l.data<float>() + l.numel(), global.sum.begin());

  RingGrads g;
  g.dq = Tensor(q.shape(), DType::f32);
  std::fill(g.dq.data<float>(), g.dq.data<float>() + g.dq.numel(), 0.0f);
  std::vector<float> current(s.max_block_floats), next(s.max_block_floats);
  std::vector<float> incoming(s.max_block_floats);
  std::vector<float> grad[2] = {std::vector<float>(s.max_block_floats),
                                std::vector<float>(s.max_block_floats)};
  pack_block(k, v, current.data());
  RingExchange grad_sends[2] = {RingExchange(s, g.traffic), RingExchange(s, g.traffic)};
  for (int t = 0; t < s.size; ++t) {
    const int owner = s.owner_at(t);
    const int64_t S = s.k_lengths[owner];
    const int64_t floats = sh.block_floats(S);
    RingExchange blocks(s, g.traffic), grad_in(s, g.traffic);
    if (t + 1 < s.size) {
      blocks.send_next(current.data(), floats, kBlockTag);
      blocks.receive_previous(next.data(), sh.block_floats(s.k_lengths[s.owner_at(t + 1)]),
                              kBlockTag);
    }
    if (t > 0) grad_in.receive_previous(incoming.data(), floats, kGradTag);
    std::vector<float>& mine = grad[t % 2];
    grad_sends[t % 2].wait();  // the send of two steps ago read this buffer
    std::fill(mine.begin(), mine.begin() + floats, 0.0f);
    const double start = MPI_Wtime();
    attend_block_backward(sh, qc.data<float>(), current.data(), S, pieces_of(s, o, owner), global,
                          doutc.data<float>(), g.dq.data<float>(), mine.data(), [&] {
                            blocks.test(), grad_in.test();
                            grad_sends[(t + 1) % 2].test();
                          });
    g.traffic.compute_seconds += MPI_Wtime() - start;
    grad_in.wait();
    if (t > 0)
      for (int64_t i = 0; i < floats; ++i) mine[i] += incoming[i];
    if (s.size > 1) grad_sends[t % 2].send_next(mine.data(), floats, kGradTag);
    blocks.wait();
    std::swap(current, next);
  }
  g.dk = Tensor(k.shape(), DType::f32);
  g.dv = Tensor(v.shape(), DType::f32);
  if (s.size == 1) {
    unpack_block(grad[0].data(), g.dk, g.dv);
  } else {
    RingExchange last(s, g.traffic);
    last.receive_previous(incoming.data(), sh.block_floats(s.k_lengths[s.rank]), kGradTag);
    last.wait();
    unpack_block(incoming.data(), g.dk, g.dv);
  }
  grad_sends[0].wait(), grad_sends[1].wait();
  return g;
}

}  // namespace qkv::distributed
