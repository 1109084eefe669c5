// The encodings the HTML report's page decodes: base64 and IEEE 754 binary16.
#include "explain/report/html.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "explain/report/legend.h"

namespace qkv::explain {
namespace {

std::string b64(const std::string& s) { return base64(s.data(), s.size()); }

TEST(Base64, Rfc4648TestVectors) {
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foob"), "Zm9vYg==");
  EXPECT_EQ(b64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  const unsigned char high[] = {0xfb, 0xff, 0xbf};
  EXPECT_EQ(base64(high, 3), "+/+/");
}

TEST(Half, ExactValuesAndRoundingToNearestEven) {
  EXPECT_EQ(to_half(0.0f), 0x0000);
  EXPECT_EQ(to_half(-0.0f), 0x8000);
  EXPECT_EQ(to_half(1.0f), 0x3c00);
  EXPECT_EQ(to_half(-2.0f), 0xc000);
  EXPECT_EQ(to_half(0.5f), 0x3800);
  EXPECT_EQ(to_half(0.1f), 0x2e66);      // 0.0999755859375
  EXPECT_EQ(to_half(65504.0f), 0x7bff);  // the largest half
  EXPECT_EQ(to_half(65519.0f), 0x7bff);  // rounds down
  EXPECT_EQ(to_half(65520.0f), 0x7c00);  // the tie rounds to even: ∞
  EXPECT_EQ(to_half(1e10f), 0x7c00);
  EXPECT_EQ(to_half(-1e10f), 0xfc00);
  EXPECT_EQ(to_half(std::ldexp(1.0f, -14)), 0x0400);         // the smallest normal
  EXPECT_EQ(to_half(std::ldexp(1.0f, -24)), 0x0001);         // the smallest subnormal
  EXPECT_EQ(to_half(std::ldexp(1.0f, -25)), 0x0000);         // a tie: to even (0)
  EXPECT_EQ(to_half(std::ldexp(3.0f, -25)), 0x0002);         // a tie: to even (2)
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // a tie: to even
  EXPECT_EQ(to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // a tie: to even
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -10)), 0x3c01);
  EXPECT_EQ(to_half(2047.0f / 1024 * 16384), 0x77ff);  // carries stay in range
  EXPECT_EQ(to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
}

TEST(Half, RoundTripErrorIsHalfAnUlp) {
  // Every float16 value decodes exactly; a float between two is within half their gap.
  for (float x = -70000; x < 70000; x += 12.37f) {
    const uint16_t h = to_half(x);
    const int e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) {
      EXPECT_GE(std::abs(x), 65520.0f);
      continue;
    }
    const double value =
        (h & 0x8000 ? -1 : 1) *
        (e == 0 ? m * std::ldexp(1.0, -24) : (1 + m / 1024.0) * std::ldexp(1.0, e - 15));
    const double ulp = std::ldexp(1.0, std::max(e, 1) - 25);
    EXPECT_LE(std::abs(value - x), ulp) << x;
  }
}

// A report whose words try to end the data early or inject markup.
Report hostile_report() {
  const std::string evil = "</script><script>alert(1)</script><b>&";
  ReportBlock block{.name = evil, .note = evil};
  block.queries = {{.text = evil}, {.text = "b"}};
  block.keys = block.queries;
  block.layers.push_back({.scale = 0.5,
                          .q = Tensor::full({1, 2, 4}, 1.0),
                          .k = Tensor::full({1, 2, 4}, 1.0),
                          .v = Tensor::full({1, 2, 3}, 0.25),
                          .weights = Tensor::full({1, 2, 2}, 0.5)});
  Report r{.title = evil};
  r.texts.emplace_back(evil, evil);
  r.blocks.push_back(block);
  return r;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HtmlReport, WordsNeverEndTheDataOrAddMarkup) {
  const std::string page = html_report(hostile_report());
  // The page's own two scripts (data, code) and nothing else.
  EXPECT_EQ(count(page, "</script>"), 2u);
  EXPECT_EQ(count(page, "<script"), 2u);
  EXPECT_EQ(count(page, "<b>&"), 0u);
  EXPECT_NE(page.find("<title>qkv · "
                      "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;&amp;</title>"),
            std::string::npos);
}

TEST(HtmlReport, NoNetworkReferences) {
  const std::string page = html_report(hostile_report());
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
}

// The "How to read this page" box of a report whose one block has `layers` layers of `heads`.
std::string legend_of(ReportSource source, int64_t layers = 1, int64_t heads = 1) {
  Report r = hostile_report();
  r.source = source;
  r.blocks[0].layers.front().q = Tensor::full({heads, 2, 4}, 1.0);
  r.blocks[0].layers.front().weights = Tensor::full({heads, 2, 2}, 0.5);
  while (static_cast<int64_t>(r.blocks[0].layers.size()) < layers)
    r.blocks[0].layers.push_back(r.blocks[0].layers.front());
  const std::string page = html_report(r);
  const std::size_t begin = page.find("<details class=\"legend\"");
  EXPECT_EQ(count(page, "How to read this page"), 1u);  // one box, whatever the model
  return page.substr(begin, page.find("</details>", begin) - begin);
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(HtmlReport, EachModelsBoxSaysWhatIsTrueOfIt) {
  const std::string learned = "v = W<sub>V</sub>x";  // a value made by a learned matrix
  const std::string encoder = legend_of(ReportSource::encoder, 6, 12);
  EXPECT_TRUE(has(encoder, learned) && has(encoder, "√d<sub>k</sub>")) << encoder;
  EXPECT_FALSE(has(encoder, "RoPE") || has(encoder, "additive")) << encoder;

  const std::string decoder = legend_of(ReportSource::decoder, 30, 9);
  EXPECT_TRUE(has(decoder, "RoPE") && has(decoder, "Causal") && has(decoder, learned)) << decoder;

  const std::string seq2seq = legend_of(ReportSource::seq2seq, 2, 2);
  EXPECT_TRUE(has(seq2seq, "sinusoidal") && has(seq2seq, "cross-attention")) << seq2seq;
  EXPECT_FALSE(has(seq2seq, "RoPE")) << seq2seq;

  // RNNsearch: the additive score, keys = values, no W_V and no √d_k; it counts from 1 elsewhere.
  const std::string rnn = legend_of(ReportSource::rnnsearch);
  EXPECT_TRUE(has(rnn, "<b>additive</b>") && has(rnn, "the values are the same vectors") &&
              has(rnn, "there is no W<sub>V</sub>") && has(rnn, "count from 1"))
      << rnn;
  EXPECT_FALSE(has(rnn, learned) || has(rnn, "divide by √d") || has(rnn, "a head in the grid"))
      << rnn;

  // A worked example: no learned matrix, and no grid on a page of one head.
  const std::string given = legend_of(ReportSource::given);
  EXPECT_TRUE(has(given, "no model") && has(given, "no learned matrix made them")) << given;
  EXPECT_FALSE(has(given, learned) || has(given, "learned matrices") ||
               has(given, "a head in the grid") || has(given, "written by hand"))
      << given;
  EXPECT_TRUE(has(legend_of(ReportSource::given, 1, 4), "a head in the grid"));

  const std::string perceiver = legend_html({.source = ReportSource::perceiver});
  EXPECT_TRUE(has(perceiver, "<b>latents</b>") && has(perceiver, "× uniform")) << perceiver;
  EXPECT_FALSE(has(perceiver, "RoPE") || has(perceiver, "additive")) << perceiver;
}

}  // namespace
}  // namespace qkv::explain
