// Generation, explained (qkv/explain_generation.h), as text at 80 columns — a header, one block a
// step as it comes, a footer — and as JSON.
#include <cmath>
#include <sstream>

#include "qkv/explain_generation.h"
#include "qkv/terminal.h"

namespace qkv::explain {
namespace {

constexpr int kColumns = 80;

std::string quoted(const std::string& token, int width) {
  std::string q(1, '"');
  q += clip(printable(token), width);
  q += '"';
  return q;
}

// "+1.92", "−2.31": the sign always shown, the minus typeset.
std::string signed_fixed(double x, int digits) {
  const std::string s = fixed(std::abs(x), digits);
  return (x < 0 && s.find_first_not_of("0.") != std::string::npos ? "−" : "+") + s;
}

// Items after `lead` columns, two spaces apart, on as many lines as 80 columns need.
std::string flow(const std::string& first, const std::vector<std::string>& items, int lead) {
  std::string out = pad_right(first, lead);
  int used = display_width(out);
  for (std::size_t k = 0; k < items.size(); ++k) {
    const int width = display_width(items[k]);
    if (k > 0 && used + 2 + width > kColumns) {
      out += '\n';
      out.append(static_cast<std::size_t>(lead), ' ');
      used = lead;
    } else if (k > 0) {
      out += "  ";
      used += 2;
    }
    out += items[k];
    used += width;
  }
  return out + "\n";
}

nlohmann::json token_json(int32_t id, const std::string& text) {
  return {{"id", id}, {"text", path_json(text)}};
}

}  // namespace

std::string generation_header_text(const ExplainedGeneration& g) {
  const KvLayout& c = g.cache;
  std::ostringstream s;
  s << wrap(
           "Generation, explained: each token as generation chose it; the heads that carried it "
           "by direct logit attribution (a head's output at the last position through W_O, the "
           "final norm at its frozen scale and the token's unembedding row), and where their "
           "last query looked (position:token weight); the KV cache after the pass that chose it.",
           kColumns, 0)
    << "\n\n"
    << wrap("KV cache: " + std::to_string(c.layers) + " layers × " + std::to_string(c.kv_heads) +
                " kv heads × " + std::to_string(c.head_dim) +
                " floats, K and V, float32: " + grouped(c.bytes_per_position()) +
                " bytes a position. Grouped-query attention: " + "the " + std::to_string(c.heads) +
                " query heads share the " + std::to_string(c.kv_heads) + " kv heads, " +
                std::to_string(c.group()) +
                " each (a kv head's cache ← the query heads that read it):",
            kColumns, 0)
    << "\n";
  std::vector<std::string> sharing;
  for (int64_t kv = 0; kv < c.kv_heads; ++kv) {
    std::string item = "kv" + std::to_string(kv) + " ←";
    for (int64_t h = kv * c.group(); h < (kv + 1) * c.group(); ++h)
      item += " h" + std::to_string(h);
    sharing.push_back(item);
  }
  s << flow("", sharing, 2)
    << wrap(
           "Each pass computes Q for its new positions only (the prompt at step 0, then one "
           "token) and keeps none of it; K and V of every position stay in the cache, read by "
           "every later query.",
           kColumns, 0)
    << "\n\n";
  return s.str();
}

std::string generation_step_text(const ExplainedGeneration& g, const GenerationStep& t) {
  std::ostringstream s;
  s << "#" << t.step + 1 << " " << quoted(t.text, 20) << "  logit " << fixed(t.logit, 2) << "  p "
    << fixed(std::exp(t.log_prob), 3) << "  after " << grouped(t.positions) << " position"
    << (t.positions == 1 ? "" : "s") << "\n";
  s << "  "
    << wrap("Q: " + grouped(t.queries) + " new a head, not kept   K,V: +" + grouped(t.queries) +
                " a kv head → " + grouped(t.positions) + " positions, " + grouped(t.cache_bytes) +
                " bytes",
            kColumns - 2, 4)
    << "\n";
  s << "  "
    << wrap("DLA parts: embedding " + signed_fixed(t.embedding, 2) + ", attention " +
                signed_fixed(t.attention, 2) + ", MLPs " + signed_fixed(t.mlp, 2) + " = " +
                fixed(t.total, 2) + " (logit " + fixed(t.logit, 2) + ")",
            kColumns - 2, 2)
    << "\n";
  for (const CarryingHead& h : t.heads) {
    std::vector<std::string> keys;
    for (const KeyWeight& k : h.looked)
      keys.push_back(std::to_string(k.position) + ":" +
                     quoted(g.tokens[static_cast<std::size_t>(k.position)], 12) + " " +
                     fixed(k.weight, 2));
    std::string name(1, 'L');
    name += std::to_string(h.layer) + "h" + std::to_string(h.head);
    s << flow("  " + pad_right(name, 6) + " kv" + std::to_string(h.kv_head) + " " +
                  pad_left(signed_fixed(h.attribution, 2), 6),
              keys, 22);
  }
  return s.str() + "\n";
}

std::string generation_footer_text(const ExplainedGeneration& g) {
  std::string text;
  for (const std::string& t : g.tokens) text += t;
  const int64_t positions = g.steps.empty() ? g.prompt_tokens : g.steps.back().positions;
  return wrap("Text: \"" + printable(text) + "\"", kColumns, 2) + "\n" +
         wrap(std::to_string(g.steps.size()) + " token" + (g.steps.size() == 1 ? "" : "s") +
                  " generated; the cache ended at " + grouped(positions) + " positions, " +
                  grouped(positions * g.cache.bytes_per_position()) +
                  " bytes (the last token's own K and V are written only if a next step runs).",
              kColumns, 0) +
         "\n";
}

nlohmann::json generation_json(const ExplainedGeneration& g) {
  const KvLayout& c = g.cache;
  nlohmann::json sharing = nlohmann::json::array(), tokens = nlohmann::json::array(),
                 steps = nlohmann::json::array();
  for (int64_t kv = 0; kv < c.kv_heads; ++kv) {
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = kv * c.group(); h < (kv + 1) * c.group(); ++h) heads.push_back(h);
    sharing.push_back({{"kv_head", kv}, {"heads", heads}});
  }
  for (std::size_t i = 0; i < g.ids.size(); ++i)
    tokens.push_back(token_json(g.ids[i], g.tokens[i]));
  for (const GenerationStep& t : g.steps) {
    nlohmann::json heads = nlohmann::json::array();
    for (const CarryingHead& h : t.heads) {
      nlohmann::json looked = nlohmann::json::array();
      for (const KeyWeight& k : h.looked)
        looked.push_back({{"position", k.position},
                          {"text", path_json(g.tokens[static_cast<std::size_t>(k.position)])},
                          {"weight", number_json(k.weight)}});
      heads.push_back({{"layer", h.layer},
                       {"head", h.head},
                       {"kv_head", h.kv_head},
                       {"attribution", number_json(h.attribution)},
                       {"looked", looked}});
    }
    nlohmann::json step = token_json(t.id, t.text);
    step["step"] = t.step;
    step["positions"] = t.positions;
    step["queries"] = t.queries;
    step["cache_bytes"] = t.cache_bytes;
    step["logit"] = number_json(t.logit);
    step["log_prob"] = number_json(t.log_prob);
    step["attribution"] = {{"embedding", number_json(t.embedding)},
                           {"attention", number_json(t.attention)},
                           {"mlp", number_json(t.mlp)},
                           {"total", number_json(t.total)}};
    step["heads"] = heads;
    steps.push_back(step);
  }
  return {{"cache",
           {{"layers", c.layers},
            {"heads", c.heads},
            {"kv_heads", c.kv_heads},
            {"head_dim", c.head_dim},
            {"group", c.group()},
            {"bytes_per_position", c.bytes_per_position()},
            {"sharing", sharing}}},
          {"prompt_tokens", g.prompt_tokens},
          {"tokens", tokens},
          {"steps", steps}};
}

}  // namespace qkv::explain
