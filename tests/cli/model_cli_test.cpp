// `qkv explain`, `qkv embed`, `qkv similarity`, `qkv search` end to end: their numbers against
// the transformers goldens (tests/golden/minilm), their text fitting 80 columns, their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "cli/report_data.h"
#include "explain/image/png_images.h"
#include "models/model_files.h"
#include "qkv/explain.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

using testing::expect_fits_80_columns;
using testing::expect_one_line_error;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::read_text;
using testing::report_data;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-model-cli-" + name)).string();
}

// ---- explain ----

TEST(ExplainCli, DefaultSentenceFocusesOnItAndFindsTheAnimalHeads) {
  test::minilm_dir();
  const auto r = run_qkv({"explain"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("The animal didn't cross the street because it was too tired"));
  EXPECT_THAT(r.out, HasSubstr("10:it"));
  EXPECT_THAT(r.out, HasSubstr("focus \"it\" (token 10)"));
  for (const char* s : {"layer 0", "layer 5", "h11", "heads look first at another word"})
    EXPECT_THAT(r.out, HasSubstr(s));
  // From the golden attentions of transformers: layer 3 head 1 and layer 5 head 11 put ≈ .64 and
  // ≈ .65 of "it"'s weight on "animal" (tests/golden/minilm/attentions_1.npy).
  EXPECT_THAT(r.out, HasSubstr("L3h1 .64"));
  EXPECT_THAT(r.out, HasSubstr("L5h11 .65"));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));  // no colour into a pipe
  expect_fits_80_columns(r.out);
}

TEST(ExplainCli, JsonWeightsMatchTransformersAttentions) {
  const Tensor golden = read_npy(test::golden_dir() + "/attentions_1.npy");  // [6, 12, 15, 15]
  const auto r = run_qkv({"explain", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tokens"].size(), 15u);
  EXPECT_EQ(j["focus"], 10);
  EXPECT_EQ(j["tokens"][2]["text"], "animal");
  EXPECT_EQ(j["tokens"][2]["surface"], "animal");
  ASSERT_EQ(j["layers"].size(), 6u);
  double worst = 0;
  for (int l = 0; l < 6; ++l)
    for (int h = 0; h < 12; ++h)
      for (int i = 0; i < 15; ++i)
        for (int k = 0; k < 15; ++k)
          worst = std::max(worst, std::abs(j["layers"][l]["weights"][h][i][k].get<double>() -
                                           golden.at<float>(l, h, i, k)));
  EXPECT_LE(worst, 1e-5);
  // scores are q·k: the logits are them scaled by 1/√32.
  const double s = j["layers"][5]["scores"][11][10][2], logit = j["layers"][5]["logits"][11][10][2];
  EXPECT_NEAR(logit, s / std::sqrt(32.0), 1e-5 * std::abs(s));
  EXPECT_EQ(j["layers"][0]["q"].size(), 12u);
  EXPECT_EQ(j["layers"][0]["q"][0].size(), 15u);
  EXPECT_EQ(j["layers"][0]["q"][0][0].size(), 32u);
}

TEST(ExplainCli, ZoomShowsTheHeatmapAndTheFocusStepByStep) {
  const Tensor golden = read_npy(test::golden_dir() + "/attentions_1.npy");
  const auto r = run_qkv({"explain", "--layer", "5", "--head", "11"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("layer 5, head 11: attention weights"));
  EXPECT_THAT(r.out, HasSubstr("1. query"));
  EXPECT_THAT(r.out, HasSubstr("2. keys"));
  EXPECT_THAT(r.out, HasSubstr("3. output out(it)"));
  char expected[32];
  std::snprintf(expected, sizeof expected, "%.2f·v(animal)", golden.at<float>(5, 11, 10, 2));
  EXPECT_THAT(r.out, HasSubstr(expected));
  expect_fits_80_columns(r.out);
  const auto colored = run_qkv({"explain", "--layer", "5", "--head", "11", "--color"});
  EXPECT_THAT(colored.out, HasSubstr("\x1b[48;5;"));
}

TEST(ExplainCli, TokenPicksTheFocus) {
  const auto r = run_qkv({"explain", "I sat on the river bank", "--token", "bank", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"][j["focus"].get<int>()]["text"], "bank");
  const auto by_index = run_qkv({"explain", "I sat on the river bank", "--token", "5", "--json"});
  EXPECT_EQ(nlohmann::json::parse(by_index.out)["focus"], 5);
  // Without a pronoun the focus is the last word.
  const auto last = run_qkv({"explain", "Boats rest on the river bank."});
  EXPECT_THAT(last.out, HasSubstr("focus \"bank\""));
}

TEST(ExplainCli, BadInputGetsOneLineAndExitTwo) {
  expect_one_line_error(run_qkv({"explain", "--layer", "6", "--head", "0"}), 2,
                        "--layer 6 is out of range; this model has layers 0–5");
  expect_one_line_error(run_qkv({"explain", "--layer", "1"}), 2, "--layer is given without --head");
  expect_one_line_error(run_qkv({"explain", "--head", "12", "--layer", "0"}), 2,
                        "--head 12 is out of range; this model has heads 0–11");
  expect_one_line_error(run_qkv({"explain", "--token", "zebra"}), 2,
                        "--token 'zebra' is not a token of the text");
  expect_one_line_error(run_qkv({"explain", "caf\xc3"}), 2, "not valid UTF-8");
  // --top's 4 to 64 are a Perceiver's; its help says a sentence's 1 to 3 (issue 26, round 2).
  expect_one_line_error(run_qkv({"explain", "--top", "9"}), 2,
                        "qkv: error: --top 9 is out of range for a sentence's overview; expected "
                        "1 to 3 (up to 64 with a Perceiver model, for its latents)\n");
  EXPECT_THAT(run_qkv({"explain", "--help"}).out,
              HasSubstr("keys shown per head in the overview, 1 to 3 (default 3)"));
  expect_one_line_error(run_qkv({"explain", " "}), 2, "text: the text is only white space");
}

TEST(ExplainCli, MissingModelSaysHowToInstallIt) {
  // A model the user named is input: missing, it is a usage error (exit 2).
  expect_one_line_error(run_qkv({"explain", "--model", "/nonexistent/model"}), 2,
                        "--model /nonexistent/model does not exist; expected a BERT model "
                        "directory");
  const std::string empty_home = temp_path("empty-home");
  std::filesystem::create_directories(empty_home);
  const char* old = std::getenv("QKV_HOME");
  const std::string saved = old ? old : "";
  ::setenv("QKV_HOME", empty_home.c_str(), 1);
  const auto r = run_qkv({"explain"});
  if (old)
    ::setenv("QKV_HOME", saved.c_str(), 1);
  else
    ::unsetenv("QKV_HOME");
  expect_one_line_error(r, 1, "is not installed");
  EXPECT_THAT(r.err, HasSubstr("scripts/fetch_model"));
}

// The report's base64 (RFC 4648), decoded here independently of the writer.
std::string bytes_of(const nlohmann::json& b64) {
  const std::string in = b64.get<std::string>(),
                    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : in) {
    if (c == '=') break;
    bits = (bits << 6) | static_cast<uint32_t>(alphabet.find(c));
    if ((count += 6) >= 8) out += static_cast<char>((bits >> (count -= 8)) & 0xff);
  }
  return out;
}

std::vector<float> floats_of(const nlohmann::json& b64) {
  const std::string raw = bytes_of(b64);
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
  return v;
}

TEST(ExplainCli, HtmlReportIsSelfContainedAndCarriesTheWeights) {
  const std::string path = temp_path("report.html");
  std::filesystem::remove(path);
  const auto r = run_qkv({"explain", "--html", path});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("wrote " + path));
  const std::string html = read_text(path);
  // No network request of any kind: no URL, no external script or stylesheet.
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  const nlohmann::json data = report_data(html);
  EXPECT_EQ(data["focus"], 10);
  ASSERT_EQ(data["blocks"].size(), 1u);
  const nlohmann::json& block = data["blocks"][0];
  ASSERT_EQ(block["queries"].size(), 15u);
  ASSERT_EQ(block["layers"].size(), 6u);
  ASSERT_EQ(block["H"], 12);
  ASSERT_EQ(block["d"], 32);
  // The page computes the weights from the embedded float32 q and k: do the same here and
  // compare with transformers' attentions; the grid's thumbnails (one byte a weight for 15
  // tokens) must agree to their rounding.
  const Tensor golden = read_npy(test::golden_dir() + "/attentions_1.npy");
  const double scale = block["scale"].get<double>();
  double worst = 0, worst_thumb = 0;
  for (int l = 0; l < 6; ++l) {
    const std::vector<float> q = floats_of(block["layers"][l]["q"]);
    const std::vector<float> k = floats_of(block["layers"][l]["k"]);
    const std::string thumb = bytes_of(block["layers"][l]["thumb"]["data"]);
    ASSERT_EQ(q.size(), 12u * 15 * 32);
    ASSERT_EQ(thumb.size(), 12u * 15 * 15);
    for (int h = 0; h < 12; ++h)
      for (int i = 0; i < 15; ++i) {
        std::vector<double> z(15);
        for (int j = 0; j < 15; ++j)
          for (int t = 0; t < 32; ++t)
            z[j] += scale * q[(h * 15 + i) * 32 + t] * k[(h * 15 + j) * 32 + t];
        const double max = *std::max_element(z.begin(), z.end());
        double sum = 0;
        for (double& x : z) sum += (x = std::exp(x - max));
        for (int j = 0; j < 15; ++j) {
          const double g = golden.at<float>(l, h, i, j);
          worst = std::max(worst, std::abs(z[j] / sum - g));
          const auto byte = static_cast<unsigned char>(thumb[(h * 15 + i) * 15 + j]);
          worst_thumb = std::max(worst_thumb, std::abs(byte / 255.0 - g));
        }
      }
  }
  EXPECT_LE(worst, 6e-5);
  EXPECT_LE(worst_thumb, 0.5 / 255 + 6e-5);
  expect_one_line_error(run_qkv({"explain", "--html", "/nonexistent/dir/r.html"}), 1,
                        "/nonexistent/dir/r.html");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ExplainCli, SvgHeatmapAndModelGrid) {
  const std::string heat = temp_path("heat.svg"), grid = temp_path("grid.svg");
  ASSERT_EQ(run_qkv({"explain", "--layer", "5", "--head", "11", "--svg", heat}).exit_code, 0);
  ASSERT_EQ(run_qkv({"explain", "--svg", grid}).exit_code, 0);
  const std::string h = read_text(heat), g = read_text(grid);
  EXPECT_EQ(h.rfind("<svg", 0), 0u);
  EXPECT_THAT(h, HasSubstr("</svg>"));
  EXPECT_EQ(count(h, "<rect x="), 15u * 15u);  // one cell a (query, key) pair
  EXPECT_THAT(h, HasSubstr(">animal</text>"));
  EXPECT_THAT(h, HasSubstr("layer 5, head 11"));
  EXPECT_EQ(count(g, "<rect x="), 6u * 12u * 15u * 15u);  // every layer × head
  EXPECT_THAT(g, HasSubstr(">layer 5</text>"));
  // 300 words on the 72-head grid wrote a 363 MB SVG (issue 26's last sweep): refused, with the
  // ways that fit.
  std::string words;
  for (int i = 0; i < 300; ++i) words += "w ";
  expect_one_line_error(run_qkv({"explain", words, "--svg", temp_path("big.svg")}), 2,
                        "--svg: the grid of 72 heads of 256 tokens would draw 4,718,592 cells "
                        "(about 338 MiB of SVG), over 1,000,000; expected --png for this size, "
                        "or --layer L --head H for one heatmap, or a shorter text");
  EXPECT_FALSE(std::filesystem::exists(temp_path("big.svg")));
}

// Width and height from a PNG's IHDR (bytes 16–23, big-endian).
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  auto be32 = [&](std::size_t at) {
    uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(ExplainCli, PngHeatmapAndModelGrid) {
  const std::string heat = temp_path("heat.png"), grid = temp_path("grid.png");
  const auto r = run_qkv({"explain", "--layer", "5", "--head", "11", "--png", heat});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("wrote " + heat));
  ASSERT_EQ(run_qkv({"explain", "--png", grid}).exit_code, 0);
  const std::string h = read_text(heat), g = read_text(grid);
  ASSERT_GT(h.size(), 24u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(g.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const explain::HeatmapLayout hl = explain::heatmap_layout(15);  // 15 tokens
  EXPECT_EQ(png_size(h),
            std::make_pair(static_cast<uint32_t>(hl.width), static_cast<uint32_t>(hl.height)));
  const explain::GridLayout gl = explain::grid_layout(6, 12);
  EXPECT_EQ(png_size(g),
            std::make_pair(static_cast<uint32_t>(gl.width), static_cast<uint32_t>(gl.height)));
  // Compressed (zlib): far below 3 bytes a pixel; a cut file lacks its IEND chunk.
  for (const std::string* png : {&h, &g}) {
    EXPECT_LT(png->size(), 200000u);
    EXPECT_EQ(png->substr(png->size() - 12), std::string("\0\0\0\0IEND\xAE\x42\x60\x82", 12));
  }
  EXPECT_GT(g.size(), 20000u);  // a blank 852 x 436 image is 8 KB; the real grid is 48 KB
  expect_one_line_error(run_qkv({"explain", "--png", "/nonexistent/dir/g.png"}), 1,
                        "/nonexistent/dir/g.png");
}

// ---- embed, similarity, search ----

std::vector<float> vector_of(const nlohmann::json& e) {
  return e["vector"].get<std::vector<float>>();
}

TEST(EmbedCli, PublicReferenceValuesAndUnitLength) {
  const auto r = run_qkv({"embed", "This is an example sentence", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::vector<float> v = vector_of(j["embeddings"][0]);
  ASSERT_EQ(v.size(), 384u);
  EXPECT_NEAR(v[0], 0.06765693, 2e-7);
  EXPECT_NEAR(v[1], 0.06349593, 2e-7);
  EXPECT_NEAR(v[2], 0.04871314, 2e-7);
  double norm = 0;
  for (float x : v) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-6);
  EXPECT_EQ(j["embeddings"][0]["tokens"].size(), 7u);
}

TEST(EmbedCli, StdinLinesAndNpyMatchTheArguments) {
  const std::string npy = temp_path("embed.npy");
  std::filesystem::remove(npy);
  const auto from_stdin = run_qkv({"embed", "--npy", npy}, "The cat sat\r\nA dog slept\n");
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.describe();
  EXPECT_THAT(from_stdin.out, HasSubstr("wrote " + npy + ": 2 × 384"));
  const Tensor e = read_npy(npy);
  ASSERT_EQ(e.shape(), (Shape{2, 384}));
  const auto args = run_qkv({"embed", "The cat sat", "A dog slept", "--json"});
  const nlohmann::json j = nlohmann::json::parse(args.out);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 384; ++k) ASSERT_EQ(e.at<float>(i, k), vector_of(j["embeddings"][i])[k]);
  const auto plain = run_qkv({"embed", "The cat sat"});
  EXPECT_THAT(plain.out, HasSubstr("\"The cat sat\""));
  expect_fits_80_columns(plain.out);
}

TEST(EmbedCli, Errors) {
  expect_one_line_error(run_qkv({"embed"}), 2, "stdin is empty; expected texts");  // /dev/null
  expect_one_line_error(run_qkv({"embed", "ok", "--batch-size", "0"}), 2, "--batch-size");
  expect_one_line_error(run_qkv({"embed", "ok", "--npy", "/nonexistent/dir/x.npy"}), 1,
                        "/nonexistent/dir/x.npy");
  // A blank text is refused; one of characters the tokenizer drops embedded as [CLS] [SEP], a
  // blank text by another name (issue 26's last sweep). Each command now refuses it alike.
  const std::string tail =
      " has no tokens: the model drops every character in it (zero-width or control characters), "
      "so it would embed as a blank text; expected a text with words";
  expect_one_line_error(run_qkv({"embed", "ok", "\u200b"}), 2, "text 2 (U+200B)" + tail);
  expect_one_line_error(run_qkv({"similarity", "\u200b\x01", "ok"}), 2,
                        "text a (U+200B U+0001)" + tail);
  expect_one_line_error(run_qkv({"explain", "\u200b"}), 2, "the text (U+200B)" + tail);
  const std::string corpus = temp_path("one-line.txt");
  std::ofstream(corpus) << "a line\n";
  expect_one_line_error(run_qkv({"search", "\u200b", "--corpus", corpus}), 2,
                        "the query (U+200B)" + tail);
}

TEST(SimilarityCli, MatchesTheGoldenEmbeddings) {
  const nlohmann::json texts = test::read_golden_json("texts.json");
  const Tensor golden = read_npy(test::golden_dir() + "/embeddings_f64.npy");
  double expected = 0;
  for (int k = 0; k < 384; ++k) expected += golden.at<double>(1, k) * golden.at<double>(3, k);
  const auto r = run_qkv({"similarity", texts[1], texts[3], "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NEAR(nlohmann::json::parse(r.out)["cosine"].get<double>(), expected, 1e-5);
  const auto same = run_qkv({"similarity", "river bank", "river bank"});
  EXPECT_THAT(same.out, HasSubstr("cos(a, b) = 1.0000"));
  expect_one_line_error(run_qkv({"similarity", "only one"}), 2, "b is required");
}

TEST(SearchCli, RanksTheExactMatchFirst) {
  const std::string corpus = temp_path("corpus.txt");
  {
    std::ofstream out(corpus);
    out << "The bank raised its interest rates.\n\nI sat on the river bank.\n"
           "Cats sleep most of the day.\nWhere can I withdraw cash?\n";
  }
  const auto r = run_qkv({"search", "I sat on the river bank.", "--corpus", corpus, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 4u);  // the empty line is skipped
  EXPECT_EQ(j["results"][0]["text"], "I sat on the river bank.");
  EXPECT_NEAR(j["results"][0]["cosine"].get<double>(), 1.0, 1e-6);
  double total = 0;
  for (const auto& x : j["results"]) total += x["weight"].get<double>();
  EXPECT_NEAR(total, 1.0, 1e-9);
  const auto top = run_qkv({"search", "money", "--corpus", corpus, "--top", "2"});
  EXPECT_THAT(top.out, HasSubstr("… 2 more"));
  expect_fits_80_columns(top.out);
  expect_one_line_error(run_qkv({"search", "q", "--corpus", "/nonexistent.txt"}), 2,
                        "--corpus /nonexistent.txt: cannot open");
}

// Texts beyond the model's 256 tokens are cut to them, as sentence-transformers cuts them; explain
// said so, embed, similarity and search did not (issue 26's last sweep). Each says it once, on
// stderr, and the results are as before.
TEST(EmbedCli, TextsCutToTheModelsLimitAreNoted) {
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word ";
  const auto embed = run_qkv({"embed", "short", long_text});
  ASSERT_EQ(embed.exit_code, 0) << embed.describe();
  EXPECT_EQ(embed.err,
            "qkv: note: text 2 is longer than the model's 256 tokens and was cut to them; the rest "
            "of it is not in its embedding\n");
  EXPECT_EQ(run_qkv({"embed", "short", "a river bank"}).err, "");  // nothing cut, nothing said
  const auto both = run_qkv({"similarity", long_text, long_text + "more"});
  ASSERT_EQ(both.exit_code, 0) << both.describe();
  EXPECT_THAT(both.out, HasSubstr("cos(a, b) = 1.0000"));  // the same first 254 words
  EXPECT_EQ(both.err,
            "qkv: note: 2 of 2 texts are longer than the model's 256 tokens and were cut to them "
            "(the first: text a); the rest of each is not in its embedding\n");
  const std::string corpus = temp_path("long-corpus.txt");
  {
    std::ofstream out(corpus);
    out << "short\n\n" << long_text << "\nplain\n";
  }
  const auto search = run_qkv({"search", "plain", "--corpus", corpus});
  ASSERT_EQ(search.exit_code, 0) << search.describe();
  EXPECT_EQ(search.err,
            "qkv: note: the line \"word word word word wor…\" is longer than the model's 256 "
            "tokens and was cut to them; the rest of it is not in its embedding\n");
}

}  // namespace
}  // namespace qkv
