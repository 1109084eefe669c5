// tests/distributed/ring_attention_mpi.cpp — ring attention (src/distributed) as P MPI processes
// (run_mpi.sh starts it under mpirun; ctest for P = 2 and 4).
//
// Every rank builds the same whole problem from a seed and its oracles — the float64 reference R
// and the plain fp32 naive result N (tests/kernels/cpu/fp32_naive.h) — takes its own rows by
// ring_positions(), runs the ring, and checks its rows against R by the tolerance rule of
// docs/CONVENTIONS.md (DESIGN §3): max|X − R| ≤ 2·max|N − R| + 1e-6 for outputs, 4·… for gradients,
// the max over every rank (MPI_Allreduce) so that all ranks reach the same verdict. The
// single-process fused kernel's own distance to the ring is printed beside it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cases/naive_fp32.h"
#include "distributed/ring_layout.h"
#include "kernels/cpu/fp32_naive.h"
#include "qkv/attention.h"
#include "qkv/distributed.h"

namespace {

using qkv::Tensor;
using qkv::distributed::RingLayout;
using qkv::distributed::RingSegment;
using qkv_test::Case;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
double max_over_ranks(double x) {
  double all = 0;
  MPI_Allreduce(&x, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

// ---- the layouts, on their own (no messages) ----

TEST(RingLayout, ContiguousAndZigzagCoverTheSequenceOnce) {
  for (RingLayout layout : {RingLayout::contiguous, RingLayout::zigzag})
    for (const std::vector<int64_t>& lengths :
         std::vector<std::vector<int64_t>>{{4, 4}, {5, 0, 3, 8}, {1}, {7, 2, 9}}) {
      int64_t total = 0;
      for (int64_t n : lengths) total += n;
      std::set<int64_t> seen;
      for (int r = 0; r < static_cast<int>(lengths.size()); ++r) {
        const auto positions = qkv::distributed::ring_positions(layout, lengths, r);
        EXPECT_EQ(static_cast<int64_t>(positions.size()), lengths[r]);
        seen.insert(positions.begin(), positions.end());
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), total);
      if (total > 0) EXPECT_EQ(*seen.rbegin(), total - 1);
    }
  // Zig-zag of 8 rows on 2 ranks: chunks 0 1 | 2 3 | 4 5 | 6 7 → rank 0 {0, 1, 6, 7}.
  EXPECT_EQ(qkv::distributed::ring_positions(RingLayout::zigzag, {4, 4}, 0),
            (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(qkv::distributed::ring_positions(RingLayout::zigzag, {4, 4}, 1),
            (std::vector<int64_t>{2, 3, 4, 5}));
}

// Every causally visible (query, key) pair of every block pair in exactly one piece, no other pair.
TEST(RingLayout, CausalPiecesCoverExactlyTheVisiblePairs) {
  const std::vector<int64_t> lengths = {5, 1, 8, 3};
  for (RingLayout layout : {RingLayout::contiguous, RingLayout::zigzag})
    for (int qr = 0; qr < 4; ++qr)
      for (int kr = 0; kr < 4; ++kr) {
        const auto qs = qkv::distributed::ring_segments(layout, lengths, qr);
        const auto ks = qkv::distributed::ring_segments(layout, lengths, kr);
        const auto qpos = qkv::distributed::ring_positions(layout, lengths, qr);
        const auto kpos = qkv::distributed::ring_positions(layout, lengths, kr);
        std::vector<int> covered(qpos.size() * kpos.size(), 0);
        for (const auto& p : qkv::distributed::visible_pieces(qs, ks, true))
          for (int64_t i = 0; i < p.rows; ++i)
            for (int64_t j = 0; j < p.keys; ++j)
              if (!p.diagonal || j <= i) ++covered[(p.q0 + i) * kpos.size() + p.k0 + j];
        for (size_t i = 0; i < qpos.size(); ++i)
          for (size_t j = 0; j < kpos.size(); ++j)
            EXPECT_EQ(covered[i * kpos.size() + j], kpos[j] <= qpos[i] ? 1 : 0)
                << "layout " << (layout == RingLayout::zigzag ? "zigzag" : "contiguous")
                << " query rank " << qr << " row " << i << " key rank " << kr << " row " << j;
      }
}

// ---- the ring against the single-process result ----

// Rows `positions` of a [B, H, N, D] row-major array as a [B, H, positions, D] tensor.
Tensor rows_of(const std::vector<double>& all, int64_t B, int64_t H, int64_t N, int64_t D,
               const std::vector<int64_t>& positions) {
  const int64_t n = static_cast<int64_t>(positions.size());
  Tensor t({B, H, n, D}, qkv::DType::f32);
  float* to = t.data<float>();
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < D; ++d)
        *to++ = static_cast<float>(all[(bh * N + positions[i]) * D + d]);
  return t;
}

// max |x − all[rows]| over this rank's rows.
double max_error(const Tensor& x, const std::vector<double>& all, int64_t N,
                 const std::vector<int64_t>& positions) {
  const int64_t BH = x.dim(0) * x.dim(1), n = x.dim(2), D = x.rank() == 4 ? x.dim(3) : 1;
  double worst = 0;
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < D; ++d) {
        const double got = x.data<float>()[(bh * n + i) * D + d];
        const double want = all[(bh * N + positions[i]) * D + d];
        if (std::isnan(got) != std::isnan(want)) return qkv_test::kInf;
        if (!std::isnan(want)) worst = std::max(worst, std::abs(got - want));
      }
  return worst;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

std::vector<double> values(const Tensor& t) { return qkv_test::values_of(t); }

using qkv::cases::kGradFactor;
using qkv::cases::kOutputFactor;
using qkv::cases::rule_tolerance;

struct RingCase {
  bool causal;
  RingLayout layout;
  int64_t Hq, Hkv;
  uint64_t seed;
  std::optional<double> scale = {};  // above 1 the kernels keep logits, not raw scores, as max
  // The keys split unlike the queries (the ranks' key blocks in reverse order of size): rank r's
  // queries and keys are then different positions.
  bool keys_split_otherwise = false;
};

std::string describe(const RingCase& rc, const std::vector<int64_t>& lengths) {
  std::string s = std::string("causal=") + (rc.causal ? "top-left" : "none") +
                  " layout=" + (rc.layout == RingLayout::zigzag ? "zigzag" : "contiguous") +
                  " Hq=" + std::to_string(rc.Hq) + " Hkv=" + std::to_string(rc.Hkv) +
                  " seed=" + std::to_string(rc.seed) +
                  " scale=" + (rc.scale ? std::to_string(*rc.scale) : "default") +
                  (rc.keys_split_otherwise ? " keys in reversed blocks" : "") + " lengths=";
  for (int64_t n : lengths) s += std::to_string(n) + ",";
  return s;
}

void PrintTo(const RingCase& rc, std::ostream* os) { *os << describe(rc, {}); }

class RingVsSingleProcess : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingVsSingleProcess, ForwardAndBackwardWithinTheToleranceRule) {
  const RingCase rc = GetParam();
  const int P = world_size(), rank = world_rank();
  // Uneven blocks, one of them a single row where there are four ranks.
  const std::vector<int64_t> lengths = P == 2   ? std::vector<int64_t>{53, 94}
                                       : P == 4 ? std::vector<int64_t>{31, 1, 70, 45}
                                                : std::vector<int64_t>(P, 37);
  int64_t N = 0;
  for (int64_t n : lengths) N += n;
  const int64_t B = 2, D = 16, Dv = 12;
  Case c = qkv_test::make_case(qkv::Score::scaled_dot, B, rc.Hq, rc.Hkv, N, N, D, D, Dv, rc.seed);
  c.causal = rc.causal ? qkv::Causal::top_left : qkv::Causal::none;
  c.scale = rc.scale;
  qkv_test::round_to_float(c);
  qkv_test::Normal rng(rc.seed + 1);
  std::vector<double> dout = rng.vec(B * rc.Hq * N * Dv);
  for (double& x : dout) x = static_cast<float>(x);
  SCOPED_TRACE(describe(rc, lengths));

  // The oracles, and the single-process fused kernel.
  const auto R = qkv_test::naive_forward<double>(c), Nf = qkv_test::naive_forward<float>(c);
  const auto RG = qkv_test::naive_backward<double>(c, dout);
  const auto NG = qkv_test::naive_backward<float>(c, dout);
  const std::vector<int64_t> all = [&] {
    std::vector<int64_t> a(N);
    for (int64_t i = 0; i < N; ++i) a[i] = i;
    return a;
  }();
  const Tensor q = rows_of(c.q, B, rc.Hq, N, D, all), k = rows_of(c.k, B, rc.Hkv, N, D, all),
               v = rows_of(c.v, B, rc.Hkv, N, Dv, all);
  const qkv::AttentionOptions single{.scale = rc.scale,
                                     .causal = c.causal,
                                     .keep_for_backward = true,
                                     .path = qkv::Path::fused,
                                     .num_threads = 1};
  const qkv::AttentionResult F = qkv::attention(q, k, v, single);
  const qkv::AttentionGrads FG =
      qkv::attention_backward(rows_of(dout, B, rc.Hq, N, Dv, all), q, k, v, F, single);

  // This rank's rows through the ring.
  const auto mine = qkv::distributed::ring_positions(rc.layout, lengths, rank);
  std::vector<int64_t> key_lengths = lengths;
  if (rc.keys_split_otherwise) std::reverse(key_lengths.begin(), key_lengths.end());
  const auto mine_k = qkv::distributed::ring_positions(rc.layout, key_lengths, rank);
  const qkv::distributed::RingOptions o{
      .scale = rc.scale, .causal = rc.causal, .layout = rc.layout, .num_threads = 1};
  const Tensor ql = rows_of(c.q, B, rc.Hq, N, D, mine), kl = rows_of(c.k, B, rc.Hkv, N, D, mine_k),
               vl = rows_of(c.v, B, rc.Hkv, N, Dv, mine_k);
  const auto ring = qkv::distributed::ring_attention(MPI_COMM_WORLD, ql, kl, vl, o);
  const auto grads = qkv::distributed::ring_attention_backward(
      MPI_COMM_WORLD, rows_of(dout, B, rc.Hq, N, Dv, mine), ql, kl, vl, ring, o);

  struct Check {
    const char* name;
    const Tensor& got;
    const std::vector<double>& reference;
    const std::vector<double>& naive;
    const Tensor& fused;
    int64_t width;
    double factor;
    const std::vector<int64_t>& rows;  // this rank's positions in the tensor's sequence
  };
  const std::vector<double> lse_r = R.lse, lse_n = Nf.lse;
  for (const Check& ch : {Check{"out", ring.out, R.out, Nf.out, F.out, Dv, kOutputFactor, mine},
                          Check{"dq", grads.dq, RG.dq, NG.dq, FG.dq, D, kGradFactor, mine},
                          Check{"dk", grads.dk, RG.dk, NG.dk, FG.dk, D, kGradFactor, mine_k},
                          Check{"dv", grads.dv, RG.dv, NG.dv, FG.dv, Dv, kGradFactor, mine_k}}) {
    const double error = max_over_ranks(max_error(ch.got, ch.reference, N, ch.rows));
    const double naive = max_difference(ch.naive, ch.reference);
    const double vs_fused = max_over_ranks(max_error(ch.got, values(ch.fused), N, ch.rows));
    const double fused_error = max_difference(values(ch.fused), ch.reference);
    EXPECT_LE(error, rule_tolerance(naive, ch.factor))
        << ch.name << ": ring max|X − R| = " << error << ", fp32 naive max|N − R| = " << naive;
    // The single process under the same rule: this program's problem is the one the ring solved.
    EXPECT_LE(fused_error, rule_tolerance(naive, ch.factor))
        << ch.name << ": single-process fused max|F − R| = " << fused_error;
    if (rank == 0)
      std::printf(
          "  P=%d %s %-3s max|ring − R| %.2e  max|N − R| %.2e  max|fused − R| %.2e  "
          "max|ring − fused| %.2e\n",
          P, describe(rc, lengths).c_str(), ch.name, error, naive, fused_error, vs_fused);
  }
  // The logsumexp, row by row (−∞ nowhere here: top-left causal leaves every row key 0).
  const double lse_error = max_over_ranks(max_error(ring.logsumexp, lse_r, N, mine));
  EXPECT_LE(lse_error, rule_tolerance(max_difference(lse_n, lse_r), kOutputFactor));
}

INSTANTIATE_TEST_SUITE_P(Ring, RingVsSingleProcess,
                         ::testing::Values(RingCase{false, RingLayout::contiguous, 4, 4, 11},
                                           RingCase{true, RingLayout::contiguous, 4, 2, 12},
                                           RingCase{true, RingLayout::zigzag, 4, 1, 13},
                                           RingCase{false, RingLayout::zigzag, 2, 2, 14},
                                           RingCase{true, RingLayout::zigzag, 4, 2, 15, 1.5},
                                           RingCase{
                                               true, RingLayout::contiguous, 2, 1, 16, {}, true},
                                           RingCase{false, RingLayout::zigzag, 4, 2, 17, {}, true}),
                         [](const auto& info) {
                           const RingCase& rc = info.param;
                           return std::string(rc.causal ? "causal_" : "full_") +
                                  (rc.layout == RingLayout::zigzag ? "zigzag_" : "contiguous_") +
                                  "hq" + std::to_string(rc.Hq) + "_hkv" + std::to_string(rc.Hkv) +
                                  (rc.scale ? "_scale_above_1" : "") +
                                  (rc.keys_split_otherwise ? "_keys_split_otherwise" : "");
                         });

// A wrong shape on one rank is an error on every rank (none waits for a rank that threw).
TEST(RingErrors, MismatchedHeadsOnOneRankThrowOnEveryRank) {
  const int rank = world_rank();
  const int64_t Hq = rank == world_size() - 1 ? 2 : 4;
  const Tensor q = Tensor::full({1, Hq, 3, 8}, 0.5), k = Tensor::full({1, 2, 3, 8}, 0.5),
               v = Tensor::full({1, 2, 3, 8}, 0.5);
  if (world_size() == 1) GTEST_SKIP() << "needs two ranks";
  try {
    qkv::distributed::ring_attention(MPI_COMM_WORLD, q, k, v);
    ADD_FAILURE() << "no error on rank " << rank;
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected the same on every rank"), std::string::npos)
        << e.what();
  }
}

// Issue 26: the forward of other inputs (here rank 0's key changed in place after it) or another
// causal gave wrong gradients without a word; it is refused, on every rank.
TEST(RingErrors, AForwardOfOtherInputsOrOptionsIsRefusedOnEveryRank) {
  const int rank = world_rank();
  Tensor q({1, 2, 4, 8}), k({1, 2, 4, 8}), v({1, 2, 4, 8});
  for (Tensor* t : {&q, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->data<float>()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i + rank)));
  const Tensor dout = Tensor::full({1, 2, 4, 8}, 0.25);
  const auto forward = qkv::distributed::ring_attention(MPI_COMM_WORLD, q, k, v);
  EXPECT_NO_THROW(
      qkv::distributed::ring_attention_backward(MPI_COMM_WORLD, dout, q, k, v, forward));
  auto error_of = [&](const Tensor& key, const qkv::distributed::RingOptions& o) -> std::string {
    try {
      qkv::distributed::ring_attention_backward(MPI_COMM_WORLD, dout, q, key, v, forward, o);
    } catch (const qkv::Error& e) {
      return e.what();
    }
    return "no error";
  };
  Tensor changed = k.clone();
  if (rank == 0) changed.data<float>()[5] += 1.0f;
  const std::string other_key = error_of(changed, {});
  EXPECT_NE(other_key.find(rank == 0 ? "computed from another key: the same float32 [1, 2, 4, 8] "
                                       "but other values; expected the forward of these very"
                                     : "rank 0's inputs are invalid"),
            std::string::npos)
      << other_key;
  const std::string causal = error_of(k, {.causal = true});
  EXPECT_NE(causal.find("with causal none, not top-left"), std::string::npos) << causal;
  const std::string layout = error_of(k, {.layout = RingLayout::zigzag});
  EXPECT_NE(layout.find("with layout contiguous, not zigzag"), std::string::npos) << layout;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // One rank prints the progress; every rank runs and checks.
  if (world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
