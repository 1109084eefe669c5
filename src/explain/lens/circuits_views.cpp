// The circuit tables (qkv/explain_circuits.h) as text at 80 columns and as JSON.
#include <algorithm>
#include <cmath>

#include "qkv/explain_circuits.h"
#include "qkv/terminal.h"

namespace qkv::explain {
namespace {

constexpr int kColumns = 80, kIndent = 2, kGap = 2, kMaxLabel = 12;

// A token as a table shows it: controls spelled out, each space as "␣".
std::string shown(const std::string& token) {
  std::string out;
  for (const char c : printable(token)) out += c == ' ' ? std::string("␣") : std::string(1, c);
  return out;
}

std::string head_name(int64_t layer, int64_t head) {
  return std::to_string(layer) + "." + std::to_string(head);
}

// render(table) in blocks of columns that each fit kColumns (render clips labels to 12 columns and
// puts two spaces between columns).
std::string render_fitted(const Table& t) {
  int label = 0;
  for (const std::string& r : t.row_labels)
    label = std::max(label, display_width(clip(r, kMaxLabel)));
  std::vector<int> widths;
  for (std::size_t c = 0; c < t.column_labels.size(); ++c) {
    int w = display_width(clip(t.column_labels[c], kMaxLabel));
    for (const auto& row : t.cells) w = std::max(w, display_width(row[c]));
    widths.push_back(w);
  }
  std::string out;
  for (std::size_t first = 0; first < widths.size();) {
    std::size_t last = first;
    int used = kIndent + label;
    while (last < widths.size() && (last == first || used + kGap + widths[last] <= kColumns))
      used += kGap + widths[last++];
    Table block{.indent = kIndent};
    block.row_labels = t.row_labels;
    block.column_labels.assign(t.column_labels.begin() + static_cast<std::ptrdiff_t>(first),
                               t.column_labels.begin() + static_cast<std::ptrdiff_t>(last));
    for (const auto& row : t.cells)
      block.cells.emplace_back(row.begin() + static_cast<std::ptrdiff_t>(first),
                               row.begin() + static_cast<std::ptrdiff_t>(last));
    if (first > 0) out += '\n';
    out += render(block);
    first = last;
  }
  return out;
}

// Items after a row's first `lead` columns, two spaces apart, on as many lines as kColumns needs
// (each continuation indented to `lead`).
std::string flow(const std::vector<std::string>& items, int lead) {
  std::string out;
  int used = lead;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const int width = display_width(items[k]);
    if (k > 0 && used + kGap + width > kColumns) {
      out += '\n';
      out.append(static_cast<std::size_t>(lead), ' ');
      used = lead;
    } else if (k > 0) {
      out += "  ";
      used += kGap;
    }
    out += items[k];
    used += width;
  }
  return out;
}

const char* kind_name(Composition kind) {
  switch (kind) {
    case Composition::query:
      return "Q";
    case Composition::key:
      return "K";
    case Composition::value:
      return "V";
  }
  return "?";
}

// JSON holds only UTF-8; a token may hold part of a character: its stray bytes become U+FFFD.
nlohmann::json token_json(int32_t id, const std::string& text) {
  return {{"id", id}, {"text", path_json(text)}};
}

}  // namespace

std::string qk_text(const QkTable& t) {
  const std::string out =
      wrap("QK circuit of head " + head_name(t.layer, t.head) + " (kv head " +
               std::to_string(t.kv_head) + "), the query " + std::to_string(t.offset) +
               " position" + (t.offset == 1 ? "" : "s") +
               " after the key: logit = " + fixed(t.scale, 4) +
               " · q·k. Rows: the query token; columns: the key token. Each "
               "token's embedding through layer " +
               std::to_string(t.layer) +
               "'s attention norm, then W_Q / W_K; RoPE on q and k only. Exact for layer 0; "
               "deeper layers also read what earlier layers wrote.",
           kColumns, 0) +
      "\n\n";
  Table table;
  const auto n = static_cast<int64_t>(t.ids.size());
  for (int64_t i = 0; i < n; ++i) {
    const std::string label = shown(t.tokens[static_cast<std::size_t>(i)]);
    table.row_labels.push_back(label);
    table.column_labels.push_back(label);
    std::vector<std::string> row;
    for (int64_t j = 0; j < n; ++j) row.push_back(fixed(t.logits.data<double>()[i * n + j], 2));
    table.cells.push_back(std::move(row));
  }
  return out + render_fitted(table);
}

std::string ov_text(const OvTable& t) {
  std::string out =
      wrap("OV circuit of head " + head_name(t.layer, t.head) + " (kv head " +
               std::to_string(t.kv_head) +
               "): what each token's value promotes. The token's "
               "embedding through layer " +
               std::to_string(t.layer) +
               "'s attention norm, W_V, W_O (the head attending wholly to it), the final norm (at "
               "its own scale) and the unembedding. Exact for layer 0; deeper layers also read "
               "what earlier layers wrote.",
           kColumns, 0) +
      "\n\n";
  int label = 5;
  for (const OvRow& r : t.rows)
    label = std::max(label, display_width(clip(shown(r.token), kMaxLabel)));
  const std::string indent(static_cast<std::size_t>(kIndent), ' ');
  const int lead = kIndent + label + kGap + 8 + kGap;  // where the promoted tokens start
  out += indent + pad_right("token", label) + "  " + pad_left("‖W_OV x‖", 8) + "  promotes most\n";
  for (const OvRow& r : t.rows) {
    std::string line = indent + pad_right(clip(shown(r.token), kMaxLabel), label) + "  " +
                       pad_left(fixed(r.norm, 3), 8) + "  ";
    std::vector<std::string> items;
    for (const Promoted& p : r.top)
      items.push_back(clip(shown(p.token), kMaxLabel) + " " + fixed(p.logit, 2));
    line += flow(items, lead);
    out += line + "\n";
  }
  if (t.outputs.empty()) return out;
  Table table;
  for (const std::string& o : t.output_tokens) table.column_labels.push_back(shown(o));
  for (const OvRow& r : t.rows) {
    table.row_labels.push_back(shown(r.token));
    std::vector<std::string> row;
    for (const double x : r.outputs) row.push_back(fixed(x, 2));
    table.cells.push_back(std::move(row));
  }
  return out + "\nThe logits of the chosen outputs (columns) for each input (rows):\n" +
         render_fitted(table);
}

std::string composers_text(const std::vector<Composers>& readers, Composition kind) {
  const std::string k = kind_name(kind);
  std::string out = wrap(
      k +
          "-composition of each head with the heads of earlier layers (Elhage et al. 2021): ‖M "
          "W_OV‖ / (‖M‖ ‖W_OV‖), M = " +
          (kind == Composition::key     ? std::string("W_QK")
           : kind == Composition::query ? std::string("W_QKᵀ")
                                        : std::string("W_OV")) +
          " of the reader, RoPE at offset 0. 0: reads nothing the writer writes; 1: reads "
          "only it. Unrelated heads score about 1/√hidden.",
      kColumns, 0);
  const std::string indent(static_cast<std::size_t>(kIndent), ' ');
  const int lead = kIndent + 5 + kGap + 9 + kGap;
  out += "\n\n" + indent + pad_right("head", 5) + "  " + pad_left("induction", 9) +
         "  top composers (head score)\n";
  for (const Composers& c : readers) {
    std::vector<std::string> items;
    for (const auto& [score, layer, head] : c.top)
      items.push_back(head_name(layer, head) + " " + fixed(score, 3));
    out += indent + pad_right(head_name(c.layer, c.head), 5) + "  " +
           pad_left(fixed(c.induction, 3), 9) + "  " +
           (items.empty() ? "(layer 0: none)" : flow(items, lead)) + "\n";
  }
  return out;
}

nlohmann::json qk_json(const QkTable& t) {
  nlohmann::json tokens = nlohmann::json::array();
  for (std::size_t i = 0; i < t.ids.size(); ++i)
    tokens.push_back(token_json(t.ids[i], t.tokens[i]));
  return {{"layer", t.layer},
          {"head", t.head},
          {"kv_head", t.kv_head},
          {"offset", t.offset},
          {"scale", number_json(t.scale)},
          {"tokens", tokens},
          {"logits", tensor_json(t.logits)}};
}

nlohmann::json ov_json(const OvTable& t) {
  nlohmann::json outputs = nlohmann::json::array(), rows = nlohmann::json::array();
  for (std::size_t i = 0; i < t.outputs.size(); ++i)
    outputs.push_back(token_json(t.outputs[i], t.output_tokens[i]));
  for (const OvRow& r : t.rows) {
    nlohmann::json top = nlohmann::json::array(), logits = nlohmann::json::array();
    for (const Promoted& p : r.top) {
      nlohmann::json item = token_json(p.id, p.token);
      item["logit"] = number_json(p.logit);
      top.push_back(item);
    }
    for (const double x : r.outputs) logits.push_back(number_json(x));
    nlohmann::json row = token_json(r.id, r.token);
    row["norm"] = number_json(r.norm);
    row["top"] = top;
    row["outputs"] = logits;
    rows.push_back(row);
  }
  return {{"layer", t.layer},
          {"head", t.head},
          {"kv_head", t.kv_head},
          {"outputs", outputs},
          {"rows", rows}};
}

nlohmann::json composers_json(const std::vector<Composers>& readers, Composition kind) {
  nlohmann::json list = nlohmann::json::array();
  for (const Composers& c : readers) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [score, layer, head] : c.top)
      top.push_back({{"layer", layer}, {"head", head}, {"score", number_json(score)}});
    list.push_back({{"layer", c.layer},
                    {"head", c.head},
                    {"induction", number_json(c.induction)},
                    {"top", top},
                    {"scores", tensor_json(c.scores)}});
  }
  return {{"kind", kind_name(kind)}, {"readers", list}};
}

}  // namespace qkv::explain
