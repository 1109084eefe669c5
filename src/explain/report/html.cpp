#include "explain/report/html.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "explain/markup.h"
#include "explain/report/html/assets.h"
#include "explain/report/legend.h"

namespace qkv::explain {
namespace {

std::string f32_base64(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<float> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(c.value(static_cast<int64_t>(i)));
  return base64(v.data(), v.size() * sizeof(float));
}

std::string f16_base64(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint16_t> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = to_half(static_cast<float>(c.value(static_cast<int64_t>(i))));
  return base64(v.data(), v.size() * sizeof(uint16_t));
}

// Each head's weights max-pooled into at most 64 × 64 bytes (0 → 0, 1 → 255): the model grid.
nlohmann::json thumbnails(const Tensor& weights) {
  const Tensor w = weights.contiguous();
  const int64_t heads = w.dim(0), n = w.dim(1), m = w.dim(2);
  const int64_t tn = std::min<int64_t>(n, 64), tm = std::min<int64_t>(m, 64);
  std::vector<uint8_t> out(static_cast<std::size_t>(heads * tn * tm), 0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        const double raw = w.value((h * n + i) * m + j);
        const double x = std::isfinite(raw) ? std::clamp(raw, 0.0, 1.0) : 0.0;  // NaN: no colour
        uint8_t& cell = out[static_cast<std::size_t>((h * tn + i * tn / n) * tm + j * tm / m)];
        cell = std::max(cell, static_cast<uint8_t>(std::lround(255 * x)));
      }
  return {{"n", tn}, {"m", tm}, {"data", base64(out.data(), out.size())}};
}

// A token with a flag is {t, sp, p, s}; one without is its text alone (the page fills in the
// flags): a Perceiver's 65,536 input symbols are 4 bytes each, not 35.
nlohmann::json tokens_json(const std::vector<ReportToken>& tokens) {
  nlohmann::json a = nlohmann::json::array();
  for (const ReportToken& t : tokens) {
    if (!t.special && !t.punctuation && t.segment == 0)
      a.push_back(t.text);
    else
      a.push_back({{"t", t.text}, {"sp", t.special}, {"p", t.punctuation}, {"s", t.segment}});
  }
  return a;
}

// The page's names of the scores: "scaled_dot", "dot", "general", ...
std::string page_score_name(Score score) {
  std::string name(to_string(score));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// A block of weights only (no q and k: a Perceiver's latents): each layer's weights [H, n, m] as
// float32 — 5.3 bytes a weight in base64, the tooltip's 5 decimals exact — and its tokens.
nlohmann::json weights_block_json(const ReportBlock& b) {
  nlohmann::json layers = nlohmann::json::array();
  for (const AttentionCapture& l : b.layers) layers.push_back({{"weights", f32_base64(l.weights)}});
  const int64_t heads = b.layers.front().weights.dim(0);
  return {{"name", b.name},
          {"note", b.note},
          {"wo", true},
          {"same", b.same_tokens},
          {"queries", tokens_json(b.queries)},
          {"keys", tokens_json(b.keys)},
          {"H", heads},
          {"Hk", heads},
          {"layers", std::move(layers)}};
}

bool weights_only(const ReportBlock& b) { return !b.layers.front().q.defined(); }

// A block that keeps its value norms (BERT, a decoder: Block::ov_norms) gives each layer's
// ‖W_O^h v_j‖ [H, m] as float32 ("vn"): the page's switch weights / value-weighted.
void add_value_norms(const ReportBlock& b, nlohmann::json& layers) {
  for (std::size_t l = 0; l < b.ov_norms.size() && l < layers.size(); ++l)
    layers[l]["vn"] = f32_base64(b.ov_norms[l]);
}

nlohmann::json block_json(const ReportBlock& b) {
  if (weights_only(b)) return weights_block_json(b);
  const AttentionCapture& first = b.layers.front();
  nlohmann::json layers = nlohmann::json::array();
  for (const AttentionCapture& l : b.layers) {
    nlohmann::json j = {
        {"q", f32_base64(l.q)}, {"k", f32_base64(l.k)}, {"thumb", thumbnails(l.weights)}};
    if (l.logits.defined()) {  // small: every number as float32
      j["v32"] = f32_base64(l.v);
      j["logits"] = f32_base64(l.logits);
      j["weights"] = f32_base64(l.weights);
    } else {
      j["v"] = f16_base64(l.v);
    }
    layers.push_back(std::move(j));
  }
  add_value_norms(b, layers);
  return {{"name", b.name},
          {"note", b.note},
          {"score", page_score_name(first.score)},
          {"scale", first.scale},
          {"causal", first.causal != Causal::none},
          {"softmax", first.normalize == Normalize::softmax},
          {"same", b.same_tokens},
          {"queries", tokens_json(b.queries)},
          {"keys", tokens_json(b.keys)},
          {"H", first.q.dim(0)},
          {"Hk", first.k.dim(0)},
          {"d", first.q.dim(2)},
          {"dv", first.v.dim(2)},
          {"kf", b.key_features},
          {"vf", b.value_features},
          {"layers", std::move(layers)}};
}

// The report's tables as HTML, under the views: a heading, a paragraph, the table (its numbers
// are the terminal's strings, so a test reads them in the file as the reader sees them).
std::string tables_html(const std::vector<ReportTable>& tables) {
  std::string h;
  for (std::size_t n = 0; n < tables.size(); ++n) {
    const ReportTable& t = tables[n];
    const std::string id = "table-" + std::to_string(n);
    const auto bar_here = [&t](std::size_t column) {
      return !t.bars.empty() && column == t.bar_at;
    };
    h += "<section aria-labelledby=\"" + id + "-h\" class=\"report-table\"><h2 id=\"" + id +
         "-h\">" + escape_markup(t.title) + "</h2>\n<p>" + escape_markup(t.intro) +
         "</p>\n<div class=\"scroll-x\"><table class=\"numbers\">\n<tr><th></th>";
    for (std::size_t c = 0; c <= t.columns.size(); ++c) {
      if (bar_here(c)) h += "<th></th>";
      if (c < t.columns.size()) h += "<th>" + escape_markup(t.columns[c]) + "</th>";
    }
    h += "</tr>\n";
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
      h += "<tr><th scope=row>" + escape_markup(t.rows[r]) + "</th>";
      for (std::size_t c = 0; c <= t.cells[r].size(); ++c) {
        if (bar_here(c)) {
          const double bar = std::isfinite(t.bars[r]) ? std::clamp(t.bars[r], 0.0, 1.0) : 0.0;
          h += "<td class=\"bar-cell\"><span class=\"bar\" style=\"width:" +
               std::to_string(std::lround(120 * bar)) + "px\"></span></td>";
        }
        if (c < t.cells[r].size()) h += "<td>" + escape_markup(t.cells[r][c]) + "</td>";
      }
      h += "</tr>\n";
    }
    h += "</table></div></section>\n";
  }
  return h;
}

}  // namespace

std::string base64(const void* data, std::size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (std::size_t i = 0; i < size; i += 3) {
    const uint32_t a = p[i], b = i + 1 < size ? p[i + 1] : 0, c = i + 2 < size ? p[i + 2] : 0;
    const uint32_t triple = (a << 16) | (b << 8) | c;
    out += kAlphabet[(triple >> 18) & 63];
    out += kAlphabet[(triple >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(triple >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[triple & 63] : '=';
  }
  return out;
}

uint16_t to_half(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t magnitude = f & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00;   // NaN
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // ≥ 65520 rounds to ∞
  if (magnitude < 0x38800000) {                       // below 2⁻¹⁴: subnormal or zero
    // value / 2⁻²⁴, rounded half to even by the FPU.
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Rebias the exponent (127 → 15) and round the 23-bit mantissa to 10 bits, half to even.
  const uint32_t rebased = magnitude - 0x38000000;
  const uint32_t rounded = rebased + 0xfff + ((rebased >> 13) & 1);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

std::string script_json(std::string json) {
  for (std::size_t at = json.find('<'); at != std::string::npos; at = json.find('<', at + 6))
    json.replace(at, 1, "\\u003c");
  return json;
}

std::string html_report(const Report& report) {
  nlohmann::json texts = nlohmann::json::array();
  for (const auto& [label, text] : report.texts) texts.push_back({label, text});
  nlohmann::json blocks = nlohmann::json::array();
  // The model grid only where it can choose something: more than one layer or head.
  LegendOptions legend{
      .source = report.source, .hand_projections = report.hand_projections, .grid = false};
  for (const ReportBlock& b : report.blocks) {
    blocks.push_back(block_json(b));
    // A weights-only block chooses its head in a menu of its own, the heads' mean among them.
    if (!weights_only(b)) legend.grid |= b.layers.size() > 1 || b.layers.front().q.dim(0) > 1;
    legend.features |= !b.key_features.empty() || !b.value_features.empty();
  }
  std::string data = nlohmann::json{
      {"title", report.title}, {"source", source_name(report.source)},
      {"grid", legend.grid},   {"texts", texts},
      {"focus", report.focus}, {"layer", report.layer},
      {"head", report.head},   {"mark", report.marked_key},
      {"blocks", blocks},
      {"lens", report.lens.empty() ? nlohmann::json(nullptr) : nlohmann::json::parse(report.lens)}}
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  data = script_json(std::move(data));

  std::string page;
  page.reserve(data.size() + 64 * 1024);
  page += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>qkv · " + escape_markup(report.title) + "</title>\n<style>\n";
  page += report_css();
  page += "</style></head>\n<body>\n";
  // The body's markers are where the box of this page's model and the report's tables go.
  const std::string_view body = report_body();
  const auto marker = [&body](std::string_view name, std::size_t from) {
    const std::size_t at = body.find(name, from);
    return std::pair{at, body.find("-->\n", at) + 4};
  };
  const auto [legend_at, legend_end] = marker("<!--legend:", 0);
  const auto [tables_at, tables_end] = marker("<!--tables:", legend_end);
  page += body.substr(0, legend_at);
  page += legend_html(legend);
  page += body.substr(legend_end, tables_at - legend_end);
  page += tables_html(report.tables);
  page += body.substr(tables_end);
  page += "<script id=\"data\" type=\"application/json\">";
  page += data;
  page += "</script>\n<script>\n";
  page += report_js();
  page += "</script>\n</body></html>\n";
  return page;
}

}  // namespace qkv::explain
