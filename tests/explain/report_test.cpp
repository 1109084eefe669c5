// report_of on a Perceiver's run: one page of the one report (html_report) — its input and
// prediction as texts, its latents as a block of weights only, what each latent gathers as a table
// of the terminal's strings — and what html_report writes of such a block: float32 weights, the
// keys as their texts, the table as HTML, a size that grows by 5.3 bytes a weight.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "explain/untrained_perceiver.h"
#include "qkv/explain.h"
#include "qkv/perceiver.h"

namespace qkv::explain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// "a#b#" counted '#', 2 heads × 2 latents; classes 0–2, the model says 2 (p = 0.7), right.
//   head 0: latent 0  0.1 0.4 0.1 0.4    latent 1  0.25 0.25 0.25 0.25
//   head 1: latent 0  0.7 0.1 0.1 0.1    latent 1  0.1  0.2  0.3  0.4
const std::vector<double> kWeights = {0.1, 0.4, 0.1, 0.4, 0.25, 0.25, 0.25, 0.25,
                                      0.7, 0.1, 0.1, 0.1, 0.1,  0.2,  0.3,  0.4};

explain::Run hand_built_run() {
  explain::Run run;
  run.model = {.name = "count.safetensors",
               .family = "perceiver",
               .task = "count",
               .layers = 1,
               .heads = 2,
               .kv_heads = 2};
  run.text = "a#b#";
  run.counted = '#';
  for (int64_t l = 0; l < 4; ++l)
    run.tokens.push_back(
        {.text = run.text.substr(static_cast<std::size_t>(l), 1), .begin = l, .end = l + 1});
  run.blocks.push_back({.kind = BlockKind::latent,
                        .name = "latents over the input",
                        .queries = {{.text = "latent 0"}, {.text = "latent 1"}},
                        .keys = run.tokens,
                        .same_tokens = false});
  run.blocks[0].layers.push_back({.weights = Tensor::from({1, 2, 2, 4}, kWeights)});
  run.output.probabilities = {0.1, 0.2, 0.7};
  run.output.predicted = 2;
  return run;
}

// The page's data: the JSON of <script id="data">.
nlohmann::json page_data(const std::string& page) {
  const std::string open = "<script id=\"data\" type=\"application/json\">";
  const std::size_t begin = page.find(open) + open.size();
  return nlohmann::json::parse(page.substr(begin, page.find("</script>", begin) - begin));
}

// RFC 4648 base64 → bytes, written here from the RFC (the page's decoder is atob).
std::vector<uint8_t> unbase64(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t bits = 0;
  int n = 0;
  for (const char c : s) {
    if (c == '=') break;
    bits = (bits << 6) | static_cast<uint32_t>(alphabet.find(c));
    if ((n += 6) >= 8) out.push_back(static_cast<uint8_t>(bits >> (n -= 8)));
  }
  return out;
}

std::vector<float> floats_of(const std::string& b64) {
  const std::vector<uint8_t> bytes = unbase64(b64);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

TEST(PerceiverReport, TextsBlockAndTableOfAHandBuiltRun) {
  const Report r = report_of("Perceiver latents: count.safetensors", hand_built_run());
  EXPECT_EQ(r.source, ReportSource::perceiver);
  EXPECT_EQ(r.marked_key, "#");
  using Text = std::pair<std::string, std::string>;
  EXPECT_THAT(r.texts, ElementsAre(Text{"input, 4 symbols", "a#b#"}, Text{"count", "2 '#'"},
                                   Text{"prediction", "2 (p = 0.700), right"}));

  // One block of weights only, [heads, latents, positions], the run's numbers.
  ASSERT_EQ(r.blocks.size(), 1u);
  const ReportBlock& b = r.blocks[0];
  EXPECT_EQ(b.kind, BlockKind::latent);
  ASSERT_EQ(b.layers.size(), 1u);
  const AttentionCapture& l = b.layers[0];
  EXPECT_FALSE(l.q.defined() || l.k.defined() || l.v.defined() || l.logits.defined());
  EXPECT_EQ(l.weights.shape(), (Shape{2, 2, 4}));
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(l.weights.value(i), kWeights[i]) << i;
  EXPECT_EQ(b.queries.size(), 2u);
  EXPECT_EQ(b.keys.size(), 4u);

  // What each latent gathers, as the terminal's strings. Latent 0: 0.8 and 0.2 on the '#' (mean
  // 0.5, the uniform look's 2/4 once); mean weights 0.4 0.25 0.1 0.25, exp(entropy) 3.63.
  // Latent 1: 0.5 and 0.6 (0.55, 1.1×); mean weights 0.175 0.225 0.275 0.325, exp(entropy) 3.90.
  ASSERT_EQ(r.tables.size(), 1u);
  const ReportTable& t = r.tables[0];
  EXPECT_EQ(t.title, "What each latent gathers");
  EXPECT_THAT(t.intro, HasSubstr("weight on the '#' (all heads' mean, and how many times a "
                                 "uniform look's 0.5000; then per head)"));
  EXPECT_THAT(t.columns, ElementsAre("on '#'", "× uniform", "head 0", "head 1", "spread", "top"));
  EXPECT_THAT(t.rows, ElementsAre("latent 0", "latent 1"));
  EXPECT_THAT(t.cells[0], ElementsAre("0.500", "1.0×", "0.80", "0.20", "4", "a@0 #@1 #@3"));
  EXPECT_THAT(t.cells[1], ElementsAre("0.550", "1.1×", "0.50", "0.60", "4", "#@3 b@2 #@1"));
  ASSERT_EQ(t.bars.size(), 2u);  // against the latent that gathers the most
  EXPECT_NEAR(t.bars[0], 0.5 / 0.55, 1e-12);
  EXPECT_EQ(t.bars[1], 1.0);
  EXPECT_EQ(t.bar_at, 2u);  // after "× uniform", as in the terminal
}

TEST(PerceiverReport, TheTerminalsGathersGiveTheTableItsTopPositions) {
  const explain::Run run = hand_built_run();
  const Report r = report_of("t", run, gathers(run, 1));  // qkv explain --top 1
  EXPECT_EQ(r.tables[0].cells[0].back(), "a@0");
  EXPECT_EQ(r.tables[0].cells[1].back(), "#@3");
  explain::Run wrong = run;
  wrong.output.predicted = 1;
  EXPECT_EQ(report_of("t", wrong).texts[2].second, "1 (p = 0.200), wrong: the count is 2");
  // A run of another model has no gathers.
  explain::Run sentence = run;
  sentence.model.family = "bert";
  EXPECT_THROW(report_of("t", sentence, gathers(run, 1)), Error);
}

TEST(PerceiverReport, ThePageCarriesTheWeightsAsFloat32AndTheTableAsHtml) {
  const std::string page = html_report(report_of("count", hand_built_run()));
  const nlohmann::json d = page_data(page);
  EXPECT_EQ(d.at("source"), "perceiver");
  EXPECT_EQ(d.at("mark"), "#");
  EXPECT_EQ(d.at("grid"), false);  // the heatmap's own menu chooses the head
  ASSERT_EQ(d.at("blocks").size(), 1u);
  const nlohmann::json& b = d.at("blocks")[0];
  EXPECT_EQ(b.at("wo"), true);
  EXPECT_EQ(b.at("H"), 2);
  EXPECT_EQ(b.at("queries"), nlohmann::json({"latent 0", "latent 1"}));
  EXPECT_EQ(b.at("keys"), nlohmann::json({"a", "#", "b", "#"}));  // no flags: the text alone
  ASSERT_EQ(b.at("layers").size(), 1u);
  EXPECT_FALSE(b.at("layers")[0].contains("q"));
  const std::vector<float> w = floats_of(b.at("layers")[0].at("weights"));
  ASSERT_EQ(w.size(), 16u);
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], static_cast<float>(kWeights[i])) << i;

  // The table, as the reader and `qkv explain`'s test read it; the legend of a Perceiver.
  EXPECT_THAT(page, HasSubstr("<tr><th></th><th>on '#'</th><th>× uniform</th><th></th>"
                              "<th>head 0</th><th>head 1</th><th>spread</th><th>top</th></tr>"));
  EXPECT_THAT(page, HasSubstr("<tr><th scope=row>latent 0</th><td>0.500</td><td>1.0×</td>"
                              "<td class=\"bar-cell\"><span class=\"bar\" style=\"width:109px\">"
                              "</span></td><td>0.80</td><td>0.20</td><td>4</td>"
                              "<td>a@0 #@1 #@3</td></tr>"));
  EXPECT_THAT(page, HasSubstr("<span class=\"bar\" style=\"width:120px\">"));
  EXPECT_THAT(page, HasSubstr("data-source=\"perceiver\""));
}

TEST(PerceiverReport, TokensWithAFlagKeepTheirFlags) {
  Report r;
  ReportBlock b{.queries = {{.text = "[CLS]", .special = true},
                            {.text = ",", .punctuation = true},
                            {.text = "x", .segment = 1},
                            {.text = "y"}}};
  b.keys = b.queries;
  b.layers.push_back({.weights = Tensor::full({1, 4, 4}, 0.25)});  // weights only
  r.blocks.push_back(b);
  const nlohmann::json keys = page_data(html_report(r)).at("blocks")[0].at("keys");
  EXPECT_EQ(keys[0], nlohmann::json({{"t", "[CLS]"}, {"sp", true}, {"p", false}, {"s", 0}}));
  EXPECT_EQ(keys[1], nlohmann::json({{"t", ","}, {"sp", false}, {"p", true}, {"s", 0}}));
  EXPECT_EQ(keys[2], nlohmann::json({{"t", "x"}, {"sp", false}, {"p", false}, {"s", 1}}));
  EXPECT_EQ(keys[3], "y");
}

// A Perceiver's input is up to 65,536 symbols: the page grows by its weights as float32 in base64
// (4/3 · 4 bytes), and a few bytes a symbol (its text as a key and in the input) — not by a JSON
// number a weight (its own page was 22 bytes a weight: 94 MB at 65,536 symbols).
TEST(PerceiverReport, APageOfALongInputIsItsFloat32WeightsAndLittleMore) {
  const int64_t heads = 4, latents = 16, length = 4096;
  explain::Run run = hand_built_run();
  run.text.clear();
  run.tokens.clear();
  for (int64_t l = 0; l < length; ++l) {
    run.text += l % 7 ? 'a' : '#';
    run.tokens.push_back({.text = run.text.substr(static_cast<std::size_t>(l), 1)});
  }
  run.blocks[0].keys = run.tokens;
  run.blocks[0].queries.resize(latents, TokenInfo{.text = "latent"});
  run.blocks[0].layers[0].weights =
      Tensor::full({1, heads, latents, length}, 1.0 / static_cast<double>(length));
  const std::string page = html_report(report_of("long", run));
  const double weights = static_cast<double>(heads * latents * length);
  EXPECT_GE(static_cast<double>(page.size()), weights * 16 / 3);
  EXPECT_LE(static_cast<double>(page.size()), weights * 16 / 3 + 6.0 * length + 96 * 1024);
}

// A real (untrained) Perceiver's run: the block has the capture's shape and numbers, the table
// latent_table's strings.
TEST(PerceiverReport, ARealRunsBlockAndTableAreItsCaptureAndLatentTable) {
  const explain::Run run = untrained_perceiver_run("count");
  const Report r = report_of("count", run);
  const Tensor& w = r.blocks.at(0).layers.at(0).weights;
  ASSERT_EQ(w.shape(), (Shape{2, 3, 32}));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t l = 0; l < 32; ++l)
        EXPECT_EQ(w.value((h * 3 + n) * 32 + l), run.weight(0, h, n, l));
  const LatentTable t = latent_table(run, gathers(run, 3));
  const ReportTable& table = r.tables.at(0);
  ASSERT_EQ(table.rows.size(), 3u);
  for (std::size_t n = 0; n < 3; ++n) {
    const LatentRow& row = t.rows[n];
    EXPECT_EQ(table.rows[n], row.label);
    EXPECT_THAT(table.cells[n],
                ElementsAre(row.counted, row.times_uniform, row.per_head[0], row.per_head[1],
                            row.spread, row.top[0] + " " + row.top[1] + " " + row.top[2]));
    EXPECT_EQ(table.bars[n], row.bar);
  }
  EXPECT_EQ(r.texts.at(2).second.find(std::to_string(run.output.predicted) +
                                      " (p = " + t.probability + "), "),
            0u);
}

}  // namespace
}  // namespace qkv::explain
