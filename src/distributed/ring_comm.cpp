// Validation across ranks and the neighbour exchanges of the ring.
#include "distributed/ring_comm.h"

#include <climits>
#include <cmath>

#include "qkv/threads.h"

namespace qkv::distributed {
namespace {

// This rank's own inputs: "" when they make a valid problem, else why not.
std::string local_problem(const Tensor& q, const Tensor& k, const Tensor& v, const RingOptions& o) {
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}}) {
    if (!t->defined()) return std::string(name) + " is undefined; expected a float32 tensor";
    if (t->rank() != 4)
      return std::string(name) + " has shape " + shape_str(t->shape()) + "; expected [B, H, L, D]";
    if (t->dtype() != DType::f32)
      return std::string(name) + " is " + std::string(dtype_name(t->dtype())) +
             "; expected float32 (the fused kernels')";
  }
  if (k.dim(0) != q.dim(0) || v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || v.dim(2) != k.dim(2))
    return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
           shape_str(v.shape()) + "; expected q [B, Hq, L, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv]";
  if (k.dim(3) != q.dim(3))
    return "k has head dim " + std::to_string(k.dim(3)) + " but q " + std::to_string(q.dim(3)) +
           "; expected equal";
  if (k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0)
    return "q has " + std::to_string(q.dim(1)) + " heads and k " + std::to_string(k.dim(1)) +
           "; expected a multiple (grouped-query attention)";
  if (q.dim(3) == 0 || v.dim(3) == 0) return "a head dim of 0; expected at least 1";
  if (o.scale && !std::isfinite(*o.scale))
    return "scale " + std::to_string(*o.scale) + "; expected a finite number";
  return "";
}

}  // namespace

RingSetup ring_setup(MPI_Comm comm, const char* who, const Tensor& q, const Tensor& k,
                     const Tensor& v, const RingOptions& o, const Tensor* dout,
                     const RingResult* forward) {
  RingSetup s;
  s.comm = comm;
  MPI_Comm_rank(comm, &s.rank);
  MPI_Comm_size(comm, &s.size);
  std::string why = local_problem(q, k, v, o);
  if (why.empty() && dout != nullptr) {
    const Shape outs{q.dim(0), q.dim(1), q.dim(2), v.dim(3)}, rows{q.dim(0), q.dim(1), q.dim(2)};
    if (!dout->defined() || dout->shape() != outs)
      why = "dout is " + (dout->defined() ? shape_str(dout->shape()) : "undefined") +
            "; expected " + shape_str(outs) + " (this rank's out)";
    else if (forward->out.shape() != outs || forward->saved_max.shape() != rows ||
             forward->saved_sum.shape() != rows)
      why = "the forward's out is " +
            (forward->out.defined() ? shape_str(forward->out.shape()) : "undefined") +
            "; expected what ring_attention returned for these inputs, " + shape_str(outs);
    else if (!forward->fingerprint.recorded)
      why = "the forward has no fingerprint of its inputs; expected what ring_attention returned";
    else if (forward->layout != o.layout)
      why = std::string("the saved forward was computed with layout ") +
            (forward->layout == RingLayout::zigzag ? "zigzag, not contiguous"
                                                   : "contiguous, not zigzag") +
            "; expected the forward of these very inputs and options";
    else if (const std::string difference =
                 fingerprint_difference(forward->fingerprint, ring_fingerprint(q, k, v, o));
             !difference.empty())
      why = "the saved forward was computed " + difference +
            "; expected the forward of these very inputs and options";
  }
  // Every rank's verdict and shapes: {ok, B, Hq, Hkv, Dk, Dv, L, S}.
  constexpr int kFields = 8;
  const int64_t mine[kFields] = {why.empty(),
                                 why.empty() ? q.dim(0) : 0,
                                 why.empty() ? q.dim(1) : 0,
                                 why.empty() ? k.dim(1) : 0,
                                 why.empty() ? q.dim(3) : 0,
                                 why.empty() ? v.dim(3) : 0,
                                 why.empty() ? q.dim(2) : 0,
                                 why.empty() ? k.dim(2) : 0};
  std::vector<int64_t> all(kFields * s.size);
  MPI_Allgather(mine, kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, comm);
  const std::string prefix = std::string(who) + ": rank " + std::to_string(s.rank) + ": ";
  if (!why.empty()) throw Error(prefix + why);
  for (int r = 0; r < s.size; ++r) {
    const int64_t* f = &all[kFields * r];
    if (!f[0])
      throw Error(prefix + "rank " + std::to_string(r) +
                  "'s inputs are invalid (its own error says how); expected valid inputs on "
                  "every rank");
    for (int i = 1; i <= 5; ++i)
      if (f[i] != all[i])
        throw Error(prefix + "rank " + std::to_string(r) + " has [B, Hq, Hkv, D, Dv] = [" +
                    std::to_string(f[1]) + ", " + std::to_string(f[2]) + ", " +
                    std::to_string(f[3]) + ", " + std::to_string(f[4]) + ", " +
                    std::to_string(f[5]) + "] but rank 0 [" + std::to_string(all[1]) + ", " +
                    std::to_string(all[2]) + ", " + std::to_string(all[3]) + ", " +
                    std::to_string(all[4]) + ", " + std::to_string(all[5]) +
                    "]; expected the same on every rank");
    s.q_lengths.push_back(f[6]);
    s.k_lengths.push_back(f[7]);
  }
  RingShape& sh = s.shape;
  sh.B = q.dim(0), sh.Hq = q.dim(1), sh.Hkv = k.dim(1), sh.L = q.dim(2);
  sh.Dk = q.dim(3), sh.Dv = v.dim(3);
  sh.scale = static_cast<float>(o.scale.value_or(1.0 / std::sqrt(static_cast<double>(sh.Dk))));
  sh.threads = resolve_num_threads(o.num_threads);
  for (int64_t S : s.k_lengths)
    s.max_block_floats = std::max(s.max_block_floats, sh.block_floats(S));
  // Twice a block travels with the backward (dK, dV): MPI counts are ints.
  if (s.max_block_floats > INT_MAX)
    throw Error(prefix + "a key/value block of " + std::to_string(s.max_block_floats) +
                " floats; expected at most " + std::to_string(INT_MAX) +
                " (an MPI count): use more ranks or fewer heads per call");
  return s;
}

ForwardFingerprint ring_fingerprint(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const RingOptions& o) {
  return fingerprint_of(q, k, v,
                        {.scale = o.scale, .causal = o.causal ? Causal::top_left : Causal::none});
}

void RingExchange::send_next(const float* data, int64_t floats, int tag) {
  requests_.emplace_back();
  MPI_Isend(data, static_cast<int>(floats), MPI_FLOAT, setup_.next(), tag, setup_.comm,
            &requests_.back());
  traffic_.bytes_sent += floats * static_cast<int64_t>(sizeof(float));
  ++traffic_.messages;
}

void RingExchange::receive_previous(float* data, int64_t floats, int tag) {
  requests_.emplace_back();
  MPI_Irecv(data, static_cast<int>(floats), MPI_FLOAT, setup_.previous(), tag, setup_.comm,
            &requests_.back());
  traffic_.bytes_received += floats * static_cast<int64_t>(sizeof(float));
}

void RingExchange::wait() {
  if (requests_.empty()) return;
  const double start = MPI_Wtime();
  MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  traffic_.wait_seconds += MPI_Wtime() - start;
  requests_.clear();
}

void RingExchange::test() {
  if (requests_.empty()) return;
  int done = 0;
  MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
  if (done) requests_.clear();
}

void pack_block(const Tensor& k, const Tensor& v, float* to) {
  const Tensor kc = k.contiguous(), vc = v.contiguous();
  to = std::copy(kc.data<float>(), kc.data<float>() + kc.numel(), to);
  std::copy(vc.data<float>(), vc.data<float>() + vc.numel(), to);
}

void unpack_block(const float* from, Tensor& k, Tensor& v) {
  std::copy(from, from + k.numel(), k.data<float>());
  std::copy(from + k.numel(), from + k.numel() + v.numel(), v.data<float>());
}

}  // namespace qkv::distributed
