// The causal lens (qkv/explain_lens.h) on SmolLM2-135M against Hugging Face transformers running
// the same GGUF file's dequantized weights with its own Llama and hooks on o_proj's input, the
// attention scores and the final norm (tests/golden/make_smollm2_lens_goldens.py, which wrote
// tests/golden/smollm2/lens.json): for "The capital of France is" → " Paris" vs " Rome" (corrupted:
// "… Italy is") and "When Mary and John went to the store, John gave a drink to" → " Mary" vs
// " John" (corrupted: "… Mary gave …"): the tokens; a dozen heads' zero and mean ablation (those
// with the largest effects and a spread over the layers); four sets of knocked-out edges; those
// heads patched at every position, two of them and the stream entering six layers at the first
// position where the prompts differ and at the last; direct logit attribution of every head, every
// layer's attention and MLP and the embedding; the logit lens of every layer.
//
// The rule (docs/CONVENTIONS.md §1.5): a number x is within 1e-3 relative to the scale S it comes
// from, |x_qkv − x_golden| ≤ 1e-3 · max(|x_golden|, S), where S is
//   a pass's logit, log-probability or metric   |the clean run's target logit| (a change is a
//                                               difference of two such numbers)
//   a part of direct logit attribution          |the clean metric| (what the parts sum to)
//   a patching share (patched − corrupted) /    1: the whole gap
//   (clean − corrupted)
//   a logit-lens logit or log-probability       that layer's largest |logit|
// and a token id, a rank or a top-5 list is equal. Measured: the largest |Δ| / max(|golden|, S)
// of any quantity is 1.6e-6 (float32 through 30 layers, two implementations); each checker
// rejects one number moved by 1e-2 of its scale. Patching is driven here as patch() does it — a
// head's output at one or every position copied from the clean run by Lens::rerun's hook, the
// stream entering a layer copied at one position and run through the model's layers — but for
// the golden's heads, layers and positions only: patch() itself reruns every head at every
// position and the stream at every layer, 1,770 partial runs for the 5-token pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_files.h"
#include "qkv/causal_lm.h"
#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

using nlohmann::json;

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}

const json& golden() {
  static const json g = test::read_golden_json("lens.json", "smollm2");
  return g;
}

json triple(const Measure& m) { return json::array({m.logit, m.log_prob, m.metric}); }

// One head's output (every position: at < 0) or the stream entering `layer` at position `at`,
// copied from the clean run into the corrupted one: the share of the metric's gap restored.
double head_share(const Lens& clean, const Lens& corrupted, const Target& t, int64_t layer,
                  int64_t head, int64_t at) {
  const int64_t n = corrupted.size(), d = corrupted.model().head_dim();
  const float* from = clean.heads(layer).data<float>() + head * n * d;
  const LayerHooks hooks{.heads = [&](int64_t l, Tensor& o) {
    if (l != layer) return;
    float* to = o.data<float>() + head * n * d;
    for (int64_t i = at < 0 ? 0 : at; i < (at < 0 ? n : at + 1); ++i)
      std::copy_n(from + i * d, d, to + i * d);
  }};
  const double lo = corrupted.measure(t).metric, hi = clean.measure(t).metric;
  return (corrupted.measure(corrupted.rerun(layer, hooks), t).metric - lo) / (hi - lo);
}

double stream_share(const Lens& clean, const Lens& corrupted, const Target& t, int64_t layer,
                    int64_t at) {
  const ResidualModel& m = corrupted.model();
  const int64_t n = corrupted.size(), hidden = m.hidden();
  Tensor h = corrupted.stream(layer).clone();
  std::copy_n(clean.stream(layer).data<float>() + at * hidden, hidden,
              h.data<float>() + at * hidden);
  for (int64_t l = layer; l < m.layers(); ++l) m.layer(l, h);
  const Tensor last = h.narrow(0, n - 1, 1).clone();
  const Tensor logits = m.unembed(m.final_norm(last)).reshape({m.vocab()});
  const double lo = corrupted.measure(t).metric, hi = clean.measure(t).metric;
  return (corrupted.measure(logits, t).metric - lo) / (hi - lo);
}

json patching(const Lens& clean, const Lens& corrupted, const Target& t, const json& g) {
  json out{
      {"all_positions", json::array()}, {"one_position", json::array()}, {"stream", json::array()}};
  const auto positions = g["positions"].get<std::vector<int64_t>>();
  for (const json& lh : g["heads"])
    out["all_positions"].push_back(head_share(clean, corrupted, t, lh[0], lh[1], -1));
  for (const json& lh : g["at_each_position"]) {
    json row = json::array();
    for (const int64_t p : positions)
      row.push_back(head_share(clean, corrupted, t, lh[0], lh[1], p));
    out["one_position"].push_back(row);
  }
  for (const int64_t l : g["stream_layers"].get<std::vector<int64_t>>()) {
    json row = json::array();
    for (const int64_t p : positions) row.push_back(stream_share(clean, corrupted, t, l, p));
    out["stream"].push_back(row);
  }
  return out;
}

json attribution(const Lens& lens, const Target& t) {
  const Attribution a = direct_logit_attribution(lens, t);
  const int64_t heads = lens.model().heads();
  json rows = json::array();
  for (int64_t l = 0; l < lens.model().layers(); ++l)
    rows.push_back(
        std::vector<double>(a.heads.begin() + l * heads, a.heads.begin() + (l + 1) * heads));
  return {{"embedding", a.embedding}, {"attention", a.attention}, {"mlp", a.mlp}, {"heads", rows}};
}

json lens_rows(const Lens& lens, const Target& t) {
  json rows = json::array();
  for (const LensRow& r : logit_lens(lens, t, 5)) {
    json top = json::array(), top_log_prob = json::array();
    for (const auto& [id, p] : r.top) {
      top.push_back(id);
      top_log_prob.push_back(std::log(p));
    }
    rows.push_back({{"top", top},
                    {"top_log_prob", top_log_prob},
                    {"rank", r.target_rank},
                    {"logit", r.target_logit},
                    {"log_prob", r.target_log_prob}});
  }
  return rows;
}

// qkv's numbers for one pair, laid out as the golden lays out transformers'.
json qkv_pair(const json& g) {
  const auto model = smollm2().residual();
  const Lens clean(model, g["clean_ids"].get<std::vector<int32_t>>());
  const Lens corrupted(model, g["corrupted_ids"].get<std::vector<int32_t>>());
  const Target t{.id = g["target"].get<int32_t>(), .versus = g["versus"].get<int32_t>()};
  const auto measure = [](const Measure& m) {
    return json{{"logit", m.logit},
                {"log_prob", m.log_prob},
                {"versus_logit", m.versus_logit},
                {"metric", m.metric}};
  };
  json out{{"clean", measure(clean.measure(t))},
           {"corrupted", measure(corrupted.measure(t))},
           {"ablation", json::array()},
           {"knockout", json::array()}};
  for (const json& a : g["ablation"]) {
    const int64_t l = a["layer"], h = a["head"];
    out["ablation"].push_back({{"zero", triple(clean.ablate(l, h, Ablation::zero, t))},
                               {"mean", triple(clean.ablate(l, h, Ablation::mean, t))}});
  }
  for (const json& k : g["knockout"]) {
    std::vector<Edge> edges;
    for (const json& e : k["edges"])
      edges.push_back({.layer = e[0], .head = e[1], .query = e[2], .key = e[3]});
    out["knockout"].push_back({{"measure", triple(clean.knockout(edges, t))}});
  }
  out["patching"] = patching(clean, corrupted, t, g["patching"]);
  out["attribution"] = attribution(clean, t);
  out["logit_lens"] = lens_rows(clean, t);
  return out;
}

// qkv's numbers for every pair of the golden, computed once.
const json& qkv_numbers() {
  static const json ours = [] {
    const auto start = std::chrono::steady_clock::now();
    json pairs = json::array();
    for (const json& g : golden()["pairs"]) pairs.push_back(qkv_pair(g));
    std::printf("qkv's lens for the golden: %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return pairs;
  }();
  return ours;
}

// The rule of the header: each number's difference, and per quantity the largest relative one.
struct Checker {
  std::vector<std::string> failures;
  std::map<std::string, double> worst;  // |Δ| / max(|golden|, S), per quantity

  void near(const std::string& quantity, const std::string& where, double ours, double golden,
            double scale) {
    const double bound = std::max(std::abs(golden), scale);
    const double relative = std::abs(ours - golden) / bound;
    worst[quantity] = std::max(worst[quantity], relative);
    if (!(relative <= 1e-3))
      failures.push_back(quantity + " " + where + ": qkv " + std::to_string(ours) +
                         ", transformers " + std::to_string(golden));
  }
  void equal(const std::string& quantity, const std::string& where, const json& ours,
             const json& golden) {
    if (ours != golden)
      failures.push_back(quantity + " " + where + ": qkv " + ours.dump() + ", transformers " +
                         golden.dump());
  }
  void triples(const std::string& quantity, const std::string& where, const json& ours,
               const json& golden, double scale) {
    static const char* names[] = {"logit", "log_prob", "metric"};
    for (std::size_t i = 0; i < 3; ++i)
      near(quantity, where + " " + names[i], ours[i], golden[i], scale);
  }
};

void compare_measures(Checker& c, const std::string& pair, const json& ours, const json& g,
                      double logit) {
  for (const char* run : {"clean", "corrupted"})
    for (const char* key : {"logit", "log_prob", "versus_logit", "metric"})
      c.near("measure", pair + " " + run + " " + key, ours[run][key], g[run][key], logit);
  for (std::size_t i = 0; i < g["ablation"].size(); ++i) {
    const json& a = g["ablation"][i];
    const std::string head = pair + " L" + a["layer"].dump() + "H" + a["head"].dump();
    c.triples("zero ablation", head, ours["ablation"][i]["zero"], a["zero"], logit);
    c.triples("mean ablation", head, ours["ablation"][i]["mean"], a["mean"], logit);
  }
  for (std::size_t i = 0; i < g["knockout"].size(); ++i)
    c.triples("knockout", pair + " set " + std::to_string(i), ours["knockout"][i]["measure"],
              g["knockout"][i]["measure"], logit);
}

void compare_patching(Checker& c, const std::string& pair, const json& ours, const json& g) {
  const auto head = [&](const json& lh) { return pair + " L" + lh[0].dump() + "H" + lh[1].dump(); };
  for (std::size_t i = 0; i < g["heads"].size(); ++i)
    c.near("patching a head", head(g["heads"][i]), ours["all_positions"][i], g["all_positions"][i],
           1.0);
  for (std::size_t i = 0; i < g["at_each_position"].size(); ++i)
    for (std::size_t p = 0; p < g["positions"].size(); ++p)
      c.near("patching a head at a position",
             head(g["at_each_position"][i]) + " at " + g["positions"][p].dump(),
             ours["one_position"][i][p], g["one_position"][i][p], 1.0);
  for (std::size_t l = 0; l < g["stream_layers"].size(); ++l)
    for (std::size_t p = 0; p < g["positions"].size(); ++p)
      c.near("patching the stream",
             pair + " layer " + g["stream_layers"][l].dump() + " at " + g["positions"][p].dump(),
             ours["stream"][l][p], g["stream"][l][p], 1.0);
}

void compare_attribution(Checker& c, const std::string& pair, const json& ours, const json& g,
                         double metric) {
  c.near("attribution", pair + " embedding", ours["embedding"], g["embedding"], metric);
  for (std::size_t l = 0; l < g["attention"].size(); ++l) {
    const std::string layer = pair + " layer " + std::to_string(l);
    c.near("attribution", layer + " attention", ours["attention"][l], g["attention"][l], metric);
    c.near("attribution", layer + " mlp", ours["mlp"][l], g["mlp"][l], metric);
    for (std::size_t h = 0; h < g["heads"][l].size(); ++h)
      c.near("attribution per head", layer + " head " + std::to_string(h), ours["heads"][l][h],
             g["heads"][l][h], metric);
  }
}

void compare_lens(Checker& c, const std::string& pair, const json& ours, const json& g) {
  for (std::size_t l = 0; l < g.size(); ++l) {
    const std::string layer = pair + " layer " + std::to_string(l);
    const double scale = g[l]["scale"];
    c.near("logit lens", layer + " target logit", ours[l]["logit"], g[l]["logit"], scale);
    c.near("logit lens", layer + " target log_prob", ours[l]["log_prob"], g[l]["log_prob"], scale);
    c.equal("logit lens rank", layer, ours[l]["rank"], g[l]["rank"]);
    c.equal("logit lens top 5", layer, ours[l]["top"], g[l]["top"]);
    for (std::size_t k = 0; k < g[l]["top_log_prob"].size(); ++k)
      c.near("logit lens", layer + " top " + std::to_string(k) + " log_prob",
             ours[l]["top_log_prob"][k], g[l]["top_log_prob"][k], scale);
  }
}

Checker compare(const json& golden_pairs, const json& ours) {
  Checker c;
  for (std::size_t i = 0; i < golden_pairs.size(); ++i) {
    const json& g = golden_pairs[i];
    const std::string pair = g["name"];
    const double logit = std::abs(g["clean"]["logit"].get<double>());
    const double metric = std::abs(g["clean"]["metric"].get<double>());
    compare_measures(c, pair, ours[i], g, logit);
    compare_patching(c, pair, ours[i]["patching"], g["patching"]);
    compare_attribution(c, pair, ours[i]["attribution"], g["attribution"], metric);
    compare_lens(c, pair, ours[i]["logit_lens"], g["logit_lens"]);
  }
  return c;
}

TEST(LensGolden, TokensAreTransformers) {
  for (const json& g : golden()["pairs"]) {
    const CausalLM& m = smollm2();
    const auto ids = [&](const char* key) { return g[key].get<std::vector<int32_t>>(); };
    const auto one = [&](const char* key) { return std::vector<int32_t>{g[key].get<int32_t>()}; };
    EXPECT_EQ(m.tokenize(g["clean_text"].get<std::string>()), ids("clean_ids"));
    EXPECT_EQ(m.tokenize(g["corrupted_text"].get<std::string>()), ids("corrupted_ids"));
    EXPECT_EQ(m.tokenize(g["target_text"].get<std::string>()), one("target"));
    EXPECT_EQ(m.tokenize(g["versus_text"].get<std::string>()), one("versus"));
  }
}

TEST(LensGolden, QkvMatchesTransformers) {
  const Checker c = compare(golden()["pairs"], qkv_numbers());
  for (const auto& [quantity, worst] : c.worst)
    std::printf("%-30s largest |qkv − transformers| / max(|golden|, S): %.2e\n", quantity.c_str(),
                worst);
  for (const std::string& f : c.failures) ADD_FAILURE() << f;
  EXPECT_GE(c.worst.size(), 9u);  // every quantity was compared
}

// One number of each quantity moved by 1e-2 of its scale: the comparison names it, and nothing
// else. The numbers compared with are the golden's own (qkv's differ from them by 1.6e-6 of the
// scale at most), so that this test need not run the model.
TEST(LensGolden, APerturbedGoldenIsRejected) {
  const json& ours = golden()["pairs"];
  ASSERT_TRUE(compare(golden()["pairs"], ours).failures.empty());
  const double logit = std::abs(golden()["pairs"][0]["clean"]["logit"].get<double>());
  const double metric = std::abs(golden()["pairs"][0]["clean"]["metric"].get<double>());
  const double lens_scale = golden()["pairs"][1]["logit_lens"][10]["scale"];
  struct Case {
    json::json_pointer at;
    double scale;  // the rule's S; 0: an id or rank, moved by one
    std::string quantity;
  };
  const std::vector<Case> cases{
      {json::json_pointer("/0/clean/log_prob"), logit, "measure"},
      {json::json_pointer("/0/ablation/0/zero/0"), logit, "zero ablation"},
      {json::json_pointer("/1/ablation/3/mean/2"), logit, "mean ablation"},
      {json::json_pointer("/0/knockout/1/measure/1"), logit, "knockout"},
      {json::json_pointer("/1/patching/all_positions/0"), 1.0, "patching a head"},
      {json::json_pointer("/0/patching/one_position/1/1"), 1.0, "patching a head at a position"},
      {json::json_pointer("/1/patching/stream/3/0"), 1.0, "patching the stream"},
      {json::json_pointer("/0/attribution/mlp/29"), metric, "attribution"},
      {json::json_pointer("/0/attribution/heads/20/3"), metric, "attribution per head"},
      {json::json_pointer("/1/logit_lens/10/logit"), lens_scale, "logit lens"},
      {json::json_pointer("/1/logit_lens/10/rank"), 0, "logit lens rank"},
      {json::json_pointer("/0/logit_lens/29/top/4"), 0, "logit lens top 5"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.at.to_string());
    json g = golden()["pairs"];
    if (k.scale == 0) {
      g[k.at] = g[k.at].get<int64_t>() + 1;
    } else {
      const double x = g[k.at];
      g[k.at] = x + 1e-2 * std::max(std::abs(x), k.scale);
    }
    const Checker c = compare(g, ours);
    ASSERT_EQ(c.failures.size(), 1u);
    EXPECT_EQ(c.failures[0].rfind(k.quantity + " ", 0), 0u) << c.failures[0];
  }
}

}  // namespace
}  // namespace qkv::explain
