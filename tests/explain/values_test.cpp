// What the values carried (explain/run/values.cpp, explain/readings/values.cpp), on SmolLM2-135M
// and all-MiniLM-L6-v2, each number checked against a float64 computation written here from the
// papers' formulas and none of the code under test: every vector f^h(x_j) = W_O^h v^h_j formed in
// full, every source's part c_ij of a query's new vector summed in full (Kobayashi et al. 2020,
// 2021), the rollout multiplied out layer by layer (Abnar & Zuidema 2020).
//
// Tolerance (docs/CONVENTIONS.md §1.2): both sides compute in float64 from the same float32
// inputs, in other orders (Gram matrices against explicit vectors); the sums run over at most
// hidden × (H + 1) terms, so they differ by a few hundred ulps of the largest term. 1e-12 of the
// tensor's scale is far above that and far below what a wrong index, a dropped head, a missing
// residual or a wrong centring makes (each changes results at 1e-3 or more; the perturbation test
// below shows 1e-9 of the scale fails).
#include "explain/run/values.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "models/bert/bert.h"
#include "models/model_files.h"
#include "qkv/causal_lm.h"
#include "qkv/explain.h"
#include "qkv/sentence_model.h"

namespace qkv::explain {
namespace {

constexpr double kRelative = 1e-12;

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}
const explain::Run& france() {
  static const explain::Run run = capture(smollm2(), "The capital of France is");
  return run;
}
const SentenceModel& minilm() {
  static const SentenceModel model = SentenceModel::load(test::minilm_dir());
  return model;
}
const explain::Run& animal() {
  static const explain::Run run = capture(minilm(), kDefaultSentence);
  return run;
}

using Values = std::vector<double>;

// The checker: max |got − want| ≤ kRelative·max(1, max |want|) — a failure names the worst entry.
::testing::AssertionResult close(const Values& got, const Values& want, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " numbers, expected " << want.size();
  double scale = 1, worst = 0;
  std::size_t at = 0;
  for (const double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= worst)) worst = std::abs(got[i] - want[i]), at = i;
  if (worst <= kRelative * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": entry " << at << " is " << got[at] << ", expected " << want[at] << " (|Δ| "
         << worst << " > " << kRelative * scale << ")";
}

Values numbers(const Tensor& t) {
  const Tensor c = t.contiguous();
  Values v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = c.value(static_cast<int64_t>(i));
  return v;
}

// f^h(x_j) = W_O^h v^h_j, hidden numbers: W_O [hidden, H·d] (columns h·d … take head h), the
// capture's v [1, H, m, d].
Values written(const Tensor& w_o, const Tensor& v, int64_t h, int64_t j) {
  const int64_t hidden = w_o.dim(0), heads = v.dim(1), m = v.dim(2), d = v.dim(3);
  Values f(static_cast<std::size_t>(hidden), 0.0);
  for (int64_t r = 0; r < hidden; ++r)
    for (int64_t k = 0; k < d; ++k)
      f[static_cast<std::size_t>(r)] +=
          w_o.value(r * heads * d + h * d + k) * v.value((h * m + j) * d + k);
  return f;
}

double norm(const Values& x) {
  return std::sqrt(std::inner_product(x.begin(), x.end(), x.begin(), 0.0));
}

// ‖f^h(x_j)‖ of every head and key of layer l, [H·m].
Values written_norms(const explain::Run& run, int64_t l) {
  const Block& b = run.blocks.front();
  const Tensor& v = b.layers[static_cast<std::size_t>(l)].v;
  Values out;
  for (int64_t h = 0; h < v.dim(1); ++h)
    for (int64_t j = 0; j < v.dim(2); ++j)
      out.push_back(norm(written(b.output_matrix[static_cast<std::size_t>(l)], v, h, j)));
  return out;
}

// Kobayashi et al. 2021 from the definition: c_ij = [i = j]·x_i + Σ_h α^h_ij f^h(x_j), through
// the post-LN's centring and gain γ where `gain` is given; each row's ‖c_ij‖ / Σ_k ‖c_ik‖.
Values mixing_by_parts(const explain::Run& run, int64_t l, const Tensor& stream_in,
                       const Tensor& gain) {
  const Block& b = run.blocks.front();
  const AttentionCapture& c = b.layers[static_cast<std::size_t>(l)];
  const Tensor& w_o = b.output_matrix[static_cast<std::size_t>(l)];
  const int64_t n = run.size(), heads = c.v.dim(1), hidden = w_o.dim(0);
  std::vector<std::vector<Values>> f(static_cast<std::size_t>(heads));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < n; ++j) f[h].push_back(written(w_o, c.v, h, j));
  Values out(static_cast<std::size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      Values part(static_cast<std::size_t>(hidden), 0.0);
      for (int64_t r = 0; r < hidden; ++r) {
        double s = i == j ? stream_in.value(i * hidden + r) : 0.0;
        for (int64_t h = 0; h < heads; ++h)
          s += c.weights.value((h * n + i) * n + j) * f[h][j][static_cast<std::size_t>(r)];
        part[static_cast<std::size_t>(r)] = s;
      }
      if (gain.defined()) {
        const double mean = std::accumulate(part.begin(), part.end(), 0.0) / double(hidden);
        for (int64_t r = 0; r < hidden; ++r)
          part[static_cast<std::size_t>(r)] = (part[r] - mean) * gain.value(r);
      }
      total += out[static_cast<std::size_t>(i * n + j)] = norm(part);
    }
    for (int64_t j = 0; j < n; ++j) out[static_cast<std::size_t>(i * n + j)] /= total;
  }
  return out;
}

const Tensor& stream_in(const explain::Run& run, int64_t l) {
  return l == 0 ? run.embeddings : run.hidden[static_cast<std::size_t>(l - 1)];
}

// Abnar & Zuidema 2020 layer by layer: Ã = ½·mean_h A + ½·I (rows renormalised), R_l = Ã_l R_{l−1}.
std::vector<Values> rollout_by_layers(const explain::Run& run, bool of_mixing) {
  const int64_t n = run.size();
  std::vector<Values> out;
  Values r(static_cast<std::size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<std::size_t>(i * n + i)] = 1;  // R_{−1} = I
  for (int64_t l = 0; l < run.model.layers; ++l) {
    Values a(static_cast<std::size_t>(n * n));
    if (of_mixing) {
      a = mixing_by_parts(run, l, stream_in(run, l),
                          run.blocks.front().mixing_gain.empty()
                              ? Tensor()
                              : run.blocks.front().mixing_gain[static_cast<std::size_t>(l)]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        double total = 0;
        for (int64_t j = 0; j < n; ++j) {
          double mean = 0;
          for (int64_t h = 0; h < run.model.heads; ++h) mean += run.weight(l, h, i, j);
          total += a[i * n + j] = 0.5 * mean / double(run.model.heads) + (i == j ? 0.5 : 0.0);
        }
        for (int64_t j = 0; j < n; ++j) a[i * n + j] /= total;
      }
    }
    Values next(static_cast<std::size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < n; ++k) next[i * n + j] += a[i * n + k] * r[k * n + j];
    out.push_back(next);
    r = next;
  }
  return out;
}

TEST(ValueNorms, DecoderNormsAreTheNormsOfTheWrittenVectors) {
  const explain::Run& run = france();
  const Block& b = run.blocks.front();
  ASSERT_EQ(b.ov_norms.size(), 30u);
  ASSERT_EQ(b.output_matrix.size(), 30u);
  EXPECT_TRUE(b.mixing_gain.empty());  // pre-norm: the vectors as they are
  for (const int64_t l : {0, 14, 29}) {
    const Values want = written_norms(run, l);
    EXPECT_TRUE(close(numbers(b.ov_norms[static_cast<std::size_t>(l)]), want,
                      "SmolLM2 layer " + std::to_string(l) + "'s ‖W_O^h v^h_j‖"));
    // ‖α·f‖ = α·‖f‖, head by head.
    const Tensor vw = value_weighted(run, l);
    const int64_t n = run.size();
    Values expected;
    for (int64_t h = 0; h < run.model.heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          expected.push_back(run.weight(l, h, i, j) * want[static_cast<std::size_t>(h * n + j)]);
    EXPECT_TRUE(close(numbers(vw), expected, "value-weighted layer " + std::to_string(l)));
  }
}

TEST(ValueNorms, LongRunsNormsThroughEachHeadsGramAreTheSame) {
  // Beyond kMixingMaxTokens capture takes the norms through W_O^hᵀ W_O^h (ov_norms) instead of
  // the vectors it forms within it: the same numbers, on both models' layers.
  for (const explain::Run* run : {&france(), &animal()})
    for (const int64_t l : {0, 3}) {
      const Block& b = run->blocks.front();
      const auto at = static_cast<std::size_t>(l);
      EXPECT_TRUE(close(numbers(ov_norms(b.output_matrix[at], b.layers[at].v)),
                        written_norms(*run, l), run->model.name + " through the Gram"));
    }
}

TEST(ValueNorms, BertNormsIncludeTheValueBiasAndNotTheOutputBias) {
  const explain::Run& run = animal();
  const Block& b = run.blocks.front();
  ASSERT_EQ(b.ov_norms.size(), 6u);
  ASSERT_EQ(b.mixing_gain.size(), 6u);
  for (const int64_t l : {0, 3, 5})
    EXPECT_TRUE(close(numbers(b.ov_norms[static_cast<std::size_t>(l)]), written_norms(run, l),
                      "MiniLM layer " + std::to_string(l) + "'s ‖W_O^h v^h_j‖"));
}

TEST(Mixing, DecoderSharesAreTheNormsOfEachSourcesPart) {
  const explain::Run& run = france();
  const int64_t n = run.size();
  ASSERT_TRUE(has_mixing(run));
  ASSERT_EQ(run.hidden.size(), 30u);
  for (const int64_t l : {0, 14, 29}) {
    const Values got = numbers(mixing(run, l));
    EXPECT_TRUE(close(got, mixing_by_parts(run, l, stream_in(run, l), Tensor()),
                      "SmolLM2 layer " + std::to_string(l) + "'s mixing"));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(std::accumulate(got.begin() + i * n, got.begin() + (i + 1) * n, 0.0), 1, 1e-14);
      for (int64_t j = i + 1; j < n; ++j) EXPECT_EQ(got[i * n + j], 0) << "a later token";
    }
  }
}

TEST(Mixing, DecoderStreamIsTheCapturedRuns) {
  // The stream capture rebuilt gives, through the final norm and the unembedding, the very
  // next-token probabilities the capture reported (the same operations on the same numbers).
  const explain::Run& run = france();
  const std::shared_ptr<const ResidualModel> r = smollm2().residual();
  const int64_t n = run.size(), hidden = r->hidden();
  Tensor last({1, hidden}, DType::f32);
  std::copy_n(run.hidden.back().data<float>() + (n - 1) * hidden, hidden, last.data<float>());
  const Tensor logits = r->unembed(r->final_norm(last));
  const float* z = logits.data<float>();
  const int64_t vocab = logits.dim(1);
  const double top = *std::max_element(z, z + vocab);
  double total = 0;
  for (int64_t v = 0; v < vocab; ++v) total += std::exp(z[v] - top);
  const int32_t best = static_cast<int32_t>(std::max_element(z, z + vocab) - z);
  EXPECT_EQ(smollm2().token_text(best), run.output.next_tokens.front().first);
  EXPECT_NEAR(1 / total, run.output.next_tokens.front().second, 1e-12);
}

TEST(Mixing, BertSharesCentreAndScaleEachPartByTheLayerNorm) {
  const explain::Run& run = animal();
  const Block& b = run.blocks.front();
  for (const int64_t l : {0, 2, 5}) {
    const auto at = static_cast<std::size_t>(l);
    EXPECT_TRUE(close(numbers(mixing(run, l)),
                      mixing_by_parts(run, l, stream_in(run, l), b.mixing_gain[at]),
                      "MiniLM layer " + std::to_string(l) + "'s mixing"));
    // Without the centring and the gain the shares differ: the LayerNorm is part of the reading.
    EXPECT_FALSE(close(numbers(mixing(run, l)),
                       mixing_by_parts(run, l, stream_in(run, l), Tensor()), "no LayerNorm"));
  }
}

TEST(Rollout, IsTheProductOfTheLayersResidualAveragedAttention) {
  for (const explain::Run* run : {&animal(), &france()}) {
    const std::vector<Tensor> got = attention_rollout(*run);
    const std::vector<Values> want = rollout_by_layers(*run, false);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t l = 0; l < got.size(); ++l)
      EXPECT_TRUE(
          close(numbers(got[l]), want[l], run->model.name + " rollout " + std::to_string(l)));
    const int64_t n = run->size();
    const Values last = numbers(got.back());
    for (int64_t i = 0; i < n; ++i)  // each row a distribution over the input tokens
      EXPECT_NEAR(std::accumulate(last.begin() + i * n, last.begin() + (i + 1) * n, 0.0), 1, 1e-13);
  }
  const std::vector<Tensor> got = mixing_rollout(animal());
  const std::vector<Values> want = rollout_by_layers(animal(), true);
  for (std::size_t l = 0; l < got.size(); ++l)
    EXPECT_TRUE(close(numbers(got[l]), want[l], "MiniLM mixing rollout " + std::to_string(l)));
}

TEST(Sinks, CarryTheirWeightAndTheirValuesNorms) {
  const explain::Run& run = france();
  const std::vector<SinkValues> sinks = sink_values(run);
  const HeadRoles roles = head_roles(run);
  ASSERT_EQ(sinks.size(), roles.sinks.size());
  ASSERT_FALSE(sinks.empty());
  const int64_t n = run.size();
  std::map<int64_t, Values> by_layer;  // the norms of a layer, formed once
  for (const SinkValues& s : sinks) {
    if (!by_layer.count(s.layer)) by_layer[s.layer] = written_norms(run, s.layer);
    const Values& f = by_layer[s.layer];
    const auto at = [&](int64_t j) { return f[static_cast<std::size_t>(s.head * n + j)]; };
    double others = 0, share = 0, weight = 0, moved = 0;
    for (int64_t j = 1; j < n; ++j) others += at(j) / double(n - 1);
    for (int64_t i = 1; i < n; ++i) {
      double row = 0;
      for (int64_t j = 0; j < n; ++j) row += run.weight(s.layer, s.head, i, j) * at(j);
      share += run.weight(s.layer, s.head, i, 0) * at(0) / row / double(n - 1);
      moved += row / double(n - 1);
      weight += run.weight(s.layer, s.head, i, 0) / double(n - 1);
    }
    const std::string head = "L" + std::to_string(s.layer) + "h" + std::to_string(s.head);
    EXPECT_TRUE(close({s.weight, s.first_norm, s.others_norm, s.value_share, s.moved},
                      {weight, at(0), others, share, moved}, head));
  }
  // What the sinks show on this prompt: in most sink heads token 0's written value is smaller
  // than the others' mean, so the head moves less than a look at a typical token would.
  const auto smaller = std::count_if(sinks.begin(), sinks.end(), [](const SinkValues& s) {
    return s.first_norm < s.others_norm && s.moved < s.others_norm;
  });
  EXPECT_GT(2 * smaller, static_cast<std::ptrdiff_t>(sinks.size()));
}

TEST(ValuesChecker, RejectsAPerturbedResult) {
  // Each result above, one number moved by 1e-9 of the tensor's scale: the checker fails.
  const auto perturbed = [](Values v, std::size_t at) {
    double scale = 1;
    for (const double x : v) scale = std::max(scale, std::abs(x));
    v[at] += 1e-9 * scale;
    return v;
  };
  const Values norms = written_norms(france(), 14);
  EXPECT_FALSE(close(perturbed(numbers(france().blocks.front().ov_norms[14]), 17), norms, "p"));
  const Values mix = mixing_by_parts(france(), 14, stream_in(france(), 14), Tensor());
  EXPECT_FALSE(close(perturbed(numbers(mixing(france(), 14)), 7), mix, "p"));
  const Values roll = rollout_by_layers(animal(), false).back();
  EXPECT_FALSE(close(perturbed(numbers(attention_rollout(animal()).back()), 3), roll, "p"));
  // A dropped residual, a dropped head: far outside.
  explain::Run no_residual = france();
  for (Tensor& g : no_residual.blocks.front().mixing_gram) {
    const int64_t k = g.dim(2);
    for (int64_t j = 0; j < g.dim(1); ++j) g.data<double>()[(j * k + k - 1) * k + k - 1] = 0;
  }
  EXPECT_FALSE(close(numbers(mixing(no_residual, 14)), mix, "no residual"));
}

TEST(ValuesErrors, SayWhatIsMissing) {
  explain::Run run = france();
  run.blocks.front().mixing_gram.clear();
  EXPECT_FALSE(has_mixing(run));
  try {
    (void)mixing(run, 3);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the mixing of 5 tokens is not kept; it is computed for runs of at most 512 "
                 "tokens");
  }
  EXPECT_THROW((void)value_weighted(run, 30), Error);
  explain::Run none;
  none.model.name = "dates.safetensors";
  none.blocks.emplace_back();
  try {
    (void)value_weighted(none, 0);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "dates.safetensors's run keeps no value norms; expected BERT's or a decoder's");
  }
  EXPECT_TRUE(sink_values(none).empty());
  explain::Run long_run = france();
  long_run.tokens.resize(kMixingMaxTokens + 1);
  EXPECT_THROW((void)attention_rollout(long_run), Error);
}

}  // namespace
}  // namespace qkv::explain
