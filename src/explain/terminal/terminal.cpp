#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>
#include <vector>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

constexpr int kWidth = 80;

std::string paint(const std::string& s, const char* code, const Style& style) {
  return style.color ? std::string("\x1b[") + code + "m" + s + "\x1b[0m" : s;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Weights as a short number: ".47", "1.00", ".00".
std::string weight_str(double w) {
  std::string s = fixed(w, 2);
  return s.rfind("0.", 0) == 0 ? s.substr(1) : s;
}

// Token i as the terminal shows it (a token is cut from the user's text: printable()).
std::string label(const Run& e, int64_t i) {
  return printable(e.tokens[static_cast<std::size_t>(i)].text);
}

// The q, k and v rows of token i in layer l, head h.
const float* row(const Tensor& t, int64_t h, int64_t i, int64_t n, int64_t d) {
  return t.data<float>() + (h * n + i) * d;
}

std::string vector_head(const float* x, int64_t d, int count) {
  std::string s = "[";
  for (int64_t j = 0; j < std::min<int64_t>(count, d); ++j) s += pad_left(fixed(x[j], 2), 6);
  return s + (d > count ? "  …]" : " ]");
}

// A decoder's q, k and v as its architecture forms them from x = RMSNorm(h) (ModelHeader).
std::string query_of(const Run& e) { return e.model.query.empty() ? "RoPE(W_Q·x)" : e.model.query; }
std::string key_of(const Run& e) { return e.model.key.empty() ? "RoPE(W_K·x)" : e.model.key; }
std::string value_of(const Run& e) { return e.model.value.empty() ? "W_V·x" : e.model.value; }

// The formula with its x written as `x`: "RoPE(W_Q·x)" at "x_j" → "RoPE(W_Q·x_j)".
std::string at_token(std::string formula, const std::string& x) {
  for (std::size_t at = formula.find("·x"); at != std::string::npos;
       at = formula.find("·x", at + x.size()))
    formula.replace(at + std::string("·").size(), 1, x);
  return formula;
}

}  // namespace

std::string render_tokens(const Run& e, int64_t focus, const Style& style) {
  std::ostringstream s;
  s << "qkv explain · " << e.model.name << " · " << e.model.layers << " layers × " << e.model.heads
    << " heads, head dim " << e.model.head_dim << "\n";
  if (!e.model.features.empty()) {
    std::string line = e.model.family + ":";
    for (std::size_t i = 0; i < e.model.features.size(); ++i)
      line += (i ? "; " : " ") + e.model.features[i];
    s << wrap(line, kWidth, 2) << "\n";
  }
  if (!e.model.weights.empty()) s << wrap("weights: " + e.model.weights, kWidth, 2) << "\n";
  s << "\n";
  s << wrap(quoted(clip(printable(e.text), 480)), kWidth - 2, 2) << "\n";
  if (e.pair)
    s << "+ sentence B:\n" << wrap(quoted(clip(printable(e.text_b), 480)), kWidth - 2, 2) << "\n";
  if (e.truncated) s << "(cut to " << e.size() << " tokens, the model's limit)\n";
  s << "\ntokens (index: token)\n";
  int column = 1;
  s << ' ';
  for (int64_t i = 0; i < e.size(); ++i) {
    const std::string item = std::to_string(i).append(":").append(label(e, i));
    const int width = display_width(item) + 1;
    if (column + width > kWidth - 1) {
      s << "\n ";
      column = 1;
    }
    s << ' ' << (i == focus ? paint(item, "1;33", style) : item);
    column += width;
  }
  s << "\n\n";
  const std::string f = quoted(label(e, focus));
  if (e.causal())
    s << wrap("focus " + f + " (token " + std::to_string(focus) + "). In every head, its query q = " +
                  query_of(e) + " is scored against the key k = " + key_of(e) +
                  " of itself and every earlier token (x = RMSNorm(h); RoPE turns q and k by "
                  "their positions): weight = softmax(q·k / √" +
                  std::to_string(e.model.head_dim) + "), and the head's output for " + f +
                  " is the weighted sum of the values v = " + value_of(e) + ".",
              kWidth, 0)
      << "\n";
  else
    s << "focus " << f << " (token " << focus << "). In every head, its query\n"
      << "q = W_Q·h + b_Q is scored against every token's key k = W_K·h + b_K:\n"
      << "weight = softmax(q·k / √" << e.model.head_dim << "), and the head's output for " << f
      << " is the\nweighted sum of the values v = W_V·h + b_V.\n";
  return s.str();
}

std::string render_overview(const Run& e, int64_t focus, const Style& style) {
  std::ostringstream s;
  const std::string f = quoted(label(e, focus));
  s << "\nWhere " << f << " looks (top " << style.top << " keys a head; "
    << paint("*", "1;32", style) << " = the top key is another word)\n";
  const std::vector<HeadPick> all = picks(e, focus, style.top);
  for (const HeadPick& p : all) {
    if (p.head == 0) s << "layer " << p.layer << "\n";
    s << pad_left(std::string("h").append(std::to_string(p.head)), 5) << " "
      << (p.other_word ? paint("*", "1;32", style) : " ");
    for (int64_t j : p.top) {
      const double w = e.weight(p.layer, p.head, focus, j);
      std::string name = clip(label(e, j), 9);
      if (j == focus) name = paint(pad_right(name, 9), "33", style);
      s << " " << pad_right(name, 9) << " " << pad_left(weight_str(w), 4) << " "
        << pad_right(bar(w, 6), 6);
    }
    s << "\n";
  }
  // The heads that resolve the focus to another word, grouped by that word.
  std::map<int64_t, std::vector<const HeadPick*>> by_word;
  for (const HeadPick& p : all)
    if (p.other_word) by_word[p.top[0]].push_back(&p);
  std::vector<std::pair<int64_t, std::vector<const HeadPick*>>> groups(by_word.begin(),
                                                                       by_word.end());
  auto total = [&](const std::vector<const HeadPick*>& ps) {
    double t = 0;
    for (const HeadPick* p : ps) t += e.weight(p->layer, p->head, focus, p->top[0]);
    return t;
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const auto& a, const auto& b) { return total(a.second) > total(b.second); });
  int count = 0;
  for (const auto& g : groups) count += static_cast<int>(g.second.size());
  s << "\n"
    << count << " of " << all.size() << " heads look first at another word than " << f
    << (count ? ":" : ".") << "\n";
  // Each word's heads, strongest first, "L3h1 .64" each, wrapped between heads at 80 columns
  // under the first; a long list ends after three lines with how many more there are.
  constexpr int kIndent = 15, kLines = 3;
  for (auto& [word, ps] : groups) {
    const int64_t w = word;
    std::stable_sort(ps.begin(), ps.end(), [&](const HeadPick* a, const HeadPick* b) {
      return e.weight(a->layer, a->head, focus, w) > e.weight(b->layer, b->head, focus, w);
    });
    s << "  " << pad_right(clip(label(e, word), 10), 10) << " ←";
    int column = kIndent, lines = 1;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const HeadPick* p = ps[i];
      std::string item = "L";  // appended piece by piece: GCC 12 warns on "L" + std::string
      item += std::to_string(p->layer);
      item += 'h';
      item += std::to_string(p->head);
      item += ' ';
      item += weight_str(e.weight(p->layer, p->head, focus, word));
      if (i + 1 < ps.size()) item += ',';
      const int width = 1 + display_width(item);
      // On the last line, room for " … 123 more" after the item unless it is the last.
      const int reserve = lines == kLines && i + 1 < ps.size() ? 12 : 0;
      if (column + width + reserve > kWidth) {
        if (lines == kLines) {
          s << " … " << ps.size() - i << " more";
          break;
        }
        s << "\n" << std::string(kIndent - 1, ' ');
        column = kIndent - 1, ++lines;
      }
      s << " " << item;
      column += width;
    }
    s << "\n";
  }
  const HeadPick zoom = suggested_head(e, focus, all);
  if (e.causal())
    s << "\nMany heads put most of their weight on the first token: when nothing earlier\n"
         "matches a head's query, the softmax must still sum to 1, and the one token every\n"
         "position sees becomes the place to park it (an \"attention sink\", Xiao et al.\n"
         "2023, \"Efficient Streaming Language Models with Attention Sinks\").\n";
  else
    s << "\nMany heads put most of their weight on [CLS] or [SEP]: when nothing in the\n"
         "sentence matches a head's query, the softmax must still sum to 1, and these\n"
         "tokens serve as a place to park it (Clark et al. 2019, \"What does BERT look\n"
         "at?\").\n";
  const std::string argument = e.model.argument.empty() ? "smollm2" : e.model.argument;
  const std::string model =
      !e.causal() ? ""
      : argument.find_first_of(" '\"$\\") == std::string::npos ? " --model " + argument
                                                               : " --model '" + argument + "'";
  s << "\nZoom into one head: qkv explain" << model << " --layer " << zoom.layer << " --head "
    << zoom.head << "\nAnother focus token:  qkv explain" << model << " --token WORD\n";
  return s.str();
}

std::string render_head(const Run& e, int64_t layer, int64_t head, int64_t focus,
                        const Style& style) {
  std::ostringstream s;
  const int64_t n = e.size(), d = e.model.head_dim;
  const AttentionCapture& c = e.blocks.front().layers[static_cast<std::size_t>(layer)];
  // Columns: 3 per key while they fit in 80 columns, then 2; beyond that the first keys only.
  const int label_width = 14;
  const int cell_width = label_width + 3 * n <= kWidth ? 3 : 2;
  const int64_t shown = std::min<int64_t>(n, (kWidth - label_width) / cell_width);
  s << "\nlayer " << layer << ", head " << head
    << ": attention weights\n(row: the query's token; column: the key's token index)\n";
  std::string header(label_width, ' ');
  for (int64_t j = 0; j < shown; ++j)
    // Narrow cells leave room for every fifth index only.
    header += cell_width == 3 || j % 5 == 0
                  ? pad_right(pad_left(std::to_string(j % 100), 2), cell_width)
                  : std::string(static_cast<std::size_t>(cell_width), ' ');
  s << header << "\n";
  for (int64_t i = 0; i < n; ++i) {
    if (i >= shown && i != focus) continue;  // a square of the first keys, and the focus row
    std::string name = pad_left(std::to_string(i), 3) + " " + pad_right(clip(label(e, i), 9), 9);
    s << (i == focus ? paint(name, "1;33", style) : name) << " ";
    for (int64_t j = 0; j < shown; ++j)
      s << heatmap_cell(e.weight(layer, head, i, j), style.color) << (cell_width == 3 ? " " : "");
    s << "\n";
  }
  if (shown < n)
    s << "  (the first " << shown << " of " << n
      << " tokens, and the focus; --json has them all)\n";
  s << (style.color ? "  dark blue = 0 … yellow = 1\n"
                    : "  weight:  '  ' < .02 ≤ ·· < .2 ≤ ░░ < .4 ≤ ▒▒ < .6 ≤ ▓▓ < .8 ≤ ██\n");

  // The focus token, number by number.
  const std::string f = quoted(label(e, focus));
  const float* q = row(c.q, head, focus, n, d);
  s << "\n" << f << " step by step in layer " << layer << ", head " << head << "\n";
  s << "1. query  q = "
    << (e.causal() ? at_token(query_of(e), "x(" + label(e, focus) + ")")
                   : "W_Q·h(" + label(e, focus) + ") + b_Q")
    << ", " << d << " numbers:\n   " << vector_head(q, d, 10) << "\n";
  s << (e.causal()
            ? "2. keys   k_j = " + at_token(key_of(e), "x_j") +
                  " for every token j ≤ the query's; q·k_j is scaled by\n"
            : "2. keys   k_j = W_K·h_j + b_K for every token j; the score q·k_j is scaled by\n")
    << "   1/√" << d << " = " << fixed(e.model.scale, 4)
    << ", then softmax over j gives the weights:\n";
  s << "        key          q·k_j    ×1/√" << d << "   weight\n";
  // Keys the mask hides (a decoder's later tokens) have logit −∞: listed as one line, not with
  // the dot products they were never given.
  auto masked = [&](int64_t j) { return e.blocks.front().masked(layer, head, focus, j); };
  // The focus row read once (a long text's recomputed from its rows).
  const std::vector<double> focus_row = e.blocks.front().weight_row(layer, head, focus);
  auto at = [&](int64_t j) { return focus_row[static_cast<std::size_t>(j)]; };
  std::vector<int64_t> order, hidden;
  for (int64_t j = 0; j < n; ++j) (masked(j) ? hidden : order).push_back(j);
  const auto visible = static_cast<int64_t>(order.size());
  const int64_t listed = std::min<int64_t>(visible, 24);
  if (listed < visible)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return at(a) > at(b); });
  std::vector<int64_t> rows(order.begin(), order.begin() + listed);
  std::sort(rows.begin(), rows.end());
  for (int64_t j : rows) {
    const double raw = e.blocks.front().score(layer, head, focus, j);
    const double w = at(j);
    std::string name = pad_left(std::to_string(j), 6) + " " + pad_right(clip(label(e, j), 10), 10);
    s << (j == focus ? paint(name, "33", style) : name) << pad_left(fixed(raw, 2), 9)
      << pad_left(fixed(raw * e.model.scale, 2), 10) << pad_left(fixed(w, 3), 9) << " "
      << bar(w, 16) << "\n";
  }
  if (listed < visible)
    s << "        … " << visible - listed << " keys with smaller weights (--json)\n";
  const bool run =
      !hidden.empty() && hidden.back() - hidden.front() + 1 == static_cast<int64_t>(hidden.size());
  if (run && hidden.size() == 1)
    s << "   token " << hidden.front();
  else if (run)
    s << "   tokens " << hidden.front() << "–" << hidden.back();
  else if (!hidden.empty())
    s << "   " << hidden.size() << " tokens";
  if (!hidden.empty())
    s << (e.causal() && run ? " come later: masked" : ": masked")
      << " (−∞ before the softmax), weight 0\n";
  // Output: Σ_j w_j v_j, spelled with the largest terms.
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return at(a) > at(b); });
  std::string sum;
  double rest = 1;
  for (std::size_t t = 0; t < std::min<std::size_t>(4, order.size()); ++t) {
    const double w = at(order[t]);
    sum += (t ? " + " : "") + fixed(w, 2) + "·v(" + label(e, order[t]) + ")";
    rest -= w;
  }
  if (order.size() > 4) sum += " + … (" + fixed(std::max(rest, 0.0), 2) + " more)";
  s << "3. output out(" << label(e, focus)
    << ") = Σ_j weight_j · v_j\n   = " << wrap(sum, kWidth - 5, 5) << "\n   "
    << vector_head(row(c.head_out, head, focus, n, d), d, 10) << "\n";
  s << "   The " << e.model.heads
    << " heads' outputs, side by side, go through W_O and the feed-forward\n"
    << "   layer into the next layer's h.\n";
  return s.str();
}

std::string render_decoder(const Run& e, const Style& style) {
  (void)style;
  std::ostringstream s;
  const int64_t n = e.size(), group = e.model.kv_heads > 0 ? e.model.heads / e.model.kv_heads : 1;
  std::string grouped =
      "A decoder: each token sees only itself and the tokens before it (the "
      "causal mask), and the " +
      std::to_string(e.model.heads) + " query heads of a layer share " +
      std::to_string(e.model.kv_heads) +
      (e.model.kv_heads == 1 ? " key/value head" : " key/value heads") +
      " (grouped-query attention):";
  for (int64_t g = 0; g < e.model.kv_heads; ++g)
    grouped += (g == 0 ? " h" : ", h") + std::to_string(g * group) + "–h" +
               std::to_string((g + 1) * group - 1) + " read kv " + std::to_string(g);
  if (group == 1)  // every head its own keys and values (Llama 2, TinyLlama)
    grouped = "A decoder: each token sees only itself and the tokens before it (the causal mask); "
              "each of a layer's " + std::to_string(e.model.heads) +
              " heads has its own keys and values";
  s << "\n" << wrap(grouped + ".", kWidth, 0) << "\n";
  HeadRoles roles = head_roles(e);
  const auto list = [&](const std::vector<ScoredHead>& heads, const char* what) {
    std::string line = std::string(what) + " (" + std::to_string(heads.size()) + " of " +
                       std::to_string(e.model.layers * e.model.heads) + " heads):";
    for (std::size_t k = 0; k < std::min<std::size_t>(heads.size(), 8); ++k) {
      const auto& [w, l, h] = heads[k];
      line +=
          (k == 0 ? " L" : ", L") + std::to_string(l) + "h" + std::to_string(h) + " " + fixed(w, 2);
    }
    s << wrap(line + (heads.size() > 8 ? ", …" : ""), kWidth, 2) << "\n";
  };
  if (n > 1) {
    list(roles.sinks, "\nAttention sinks, most weight on the first token");
    list(roles.previous, "Previous-token heads, most weight on the token just before");
  }
  if (e.induction.defined())
    list(roles.induction,
         "Induction heads, on random tokens repeated: in the repeat, weight on the "
         "token that came next the first time");
  s << "\nThe next token, as the model predicts it after the whole text:\n";
  for (const auto& [token, p] : e.output.next_tokens)
    s << "  " << pad_right(quoted(printable(token)), 16) << pad_left(fixed(100 * p, 1), 5) << "%  "
      << bar(p, 20) << "\n";
  return s.str();
}

}  // namespace qkv::explain
