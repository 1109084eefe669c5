// explain::read_causal: the lens of one prompt as `qkv explain --target` asks for it — the target
// resolved, every head ablated, the attribution, the logit lens, patching and knockout.
#include <charconv>
#include <functional>

#include "qkv/explain_lens.h"
#include "qkv/terminal.h"

namespace qkv::explain {
namespace {

Error usage(const std::string& what) { return Error(what, Error::Kind::invalid_argument); }

// `text` as one token of the model's vocabulary.
int32_t one_token(const ResidualModel& m, const std::string& text, const char* what) {
  std::vector<int32_t> ids;
  try {
    ids = m.tokenize_piece(text);
  } catch (const Error& e) {  // a character outside a trained model's vocabulary
    throw usage(std::string(what) + " \"" + clip(text, 40) + "\": " + e.what());
  }
  if (ids.size() == 1) return ids.front();
  std::string pieces;
  for (const int32_t id : ids)
    pieces += (pieces.empty() ? "\"" : " + \"") + printable(m.token_text(id)) + "\"";
  throw usage(std::string(what) + " \"" + clip(text, 40) + "\" is " +
              (ids.empty() ? "no token" : std::to_string(ids.size()) + " tokens (" + pieces + ")") +
              "; expected one token of the model's vocabulary, e.g. \" Paris\" with its space");
}

// One field of an edge: a number below `count`, or * for all of them.
std::vector<int64_t> field(std::string_view s, int64_t count, const std::string& item,
                           const char* what) {
  std::vector<int64_t> all;
  if (s == "*") {
    for (int64_t i = 0; i < count; ++i) all.push_back(i);
    return all;
  }
  int64_t x = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || x < 0 || x >= count)
    throw usage("--knockout item \"" + item + "\": " + what + " \"" + std::string(s) +
                "\"; expected 0 to " + std::to_string(count - 1) + " or *");
  return {x};
}

}  // namespace

namespace {

// parse_edges over layers whose keys and causality `keys_of` and `causal` give.
std::vector<Edge> edges_of(const std::string& spec, int64_t layers, int64_t heads, int64_t n,
                           const std::function<int64_t(int64_t)>& keys_of,
                           const std::function<bool(int64_t)>& causal) {
  std::vector<Edge> edges;
  for (const std::string& item : split_commas(spec)) {
    const std::size_t dot = item.find('.'), colon = item.find(':'), arrow = item.find('>');
    if (dot == std::string::npos || colon == std::string::npos || arrow == std::string::npos ||
        !(dot < colon && colon < arrow))
      throw usage("--knockout item \"" + item +
                  "\"; expected LAYER.HEAD:QUERY>KEY, e.g. 14.3:9>4 or 14.*:*>0");
    const std::string_view s(item);
    for (const int64_t l : field(s.substr(0, dot), layers, item, "layer"))
      for (const int64_t h : field(s.substr(dot + 1, colon - dot - 1), heads, item, "head"))
        for (const int64_t q : field(s.substr(colon + 1, arrow - colon - 1), n, item, "query"))
          for (const int64_t k : field(s.substr(arrow + 1), keys_of(l), item, "key"))
            if (!causal(l) || k <= q)
              edges.push_back({.layer = l, .head = h, .query = q, .key = k});
  }
  if (edges.empty())
    throw usage("--knockout \"" + clip(spec, 40) +
                "\" blocks no edge (every key is after its query); expected some key ≤ query");
  return edges;
}

}  // namespace

std::vector<Edge> parse_edges(const std::string& spec, const ResidualModel& model, int64_t n) {
  return edges_of(
      spec, model.layers(), model.heads(), n, [&](int64_t l) { return model.keys(l, n); },
      [&](int64_t l) { return model.causal(l); });
}

std::vector<Edge> parse_edges(const std::string& spec, int64_t layers, int64_t heads, int64_t n) {
  return edges_of(
      spec, layers, heads, n, [n](int64_t) { return n; }, [](int64_t) { return true; });
}

CausalReading read_causal(std::shared_ptr<const ResidualModel> model,
                          const std::vector<int32_t>& ids, const LensRequest& request,
                          const OnProgress& progress,
                          std::shared_ptr<const ResidualModel> corrupted_model) {
  const ResidualModel& m = *model;
  const Lens lens(model, ids);
  CausalReading r;
  for (int64_t l = 0; l < m.layers(); ++l) {
    r.layer_names.push_back(m.layer_name(l));
    r.captured_at.emplace_back(0, l);
  }
  for (const int32_t id : ids) r.tokens.push_back(m.token_text(id));
  r.target_given = !request.target.empty();
  r.target.id = r.target_given ? one_token(m, request.target, "--target") : lens.top_token();
  if (!request.versus.empty()) r.target.versus = one_token(m, request.versus, "--versus");
  if (r.target.versus == r.target.id)
    throw usage("--versus is the target itself; expected another token");
  r.target_text = m.token_text(r.target.id);
  if (r.target.versus >= 0) r.versus_text = m.token_text(r.target.versus);
  std::optional<Lens> corrupted;
  if (corrupted_model) {
    corrupted.emplace(std::move(corrupted_model), ids);
  } else if (!request.corrupt.empty()) {
    corrupted.emplace(model, m.tokenize(request.corrupt));
    if (corrupted->size() != lens.size())
      throw usage("--corrupt \"" + clip(request.corrupt, 40) + "\" is " +
                  std::to_string(corrupted->size()) + " tokens and the text " +
                  std::to_string(lens.size()) + "; expected prompts of equal token length");
  }
  if (!request.knockout.empty()) r.edges = parse_edges(request.knockout, m, lens.size());
  // Progress over every rerun: the ablations, then the patching.
  const int64_t ablations = m.layers() * m.heads(),
                patches = corrupted ? ablations * (lens.size() + 1) + m.layers() * lens.size() : 0;
  r.clean = lens.measure(r.target);
  r.heads = head_effects(lens, r.target, [&](int64_t done, int64_t) {
    if (progress) progress(done, ablations + patches);
  });
  r.attribution = direct_logit_attribution(lens, r.target);
  r.logit_lens = logit_lens(lens, r.target, 5);
  for (const LensRow& row : r.logit_lens)
    for (const auto& [id, p] : row.top) r.lens_text.push_back(m.token_text(id));
  if (!r.edges.empty()) {
    r.knockout = request.knockout;
    r.knocked = lens.knockout(r.edges, r.target);
  }
  if (corrupted) {
    r.corrupt = request.corrupt;
    r.patching = patch(lens, *corrupted, r.target, [&](int64_t done, int64_t) {
      if (progress) progress(ablations + done, ablations + patches);
    });
  }
  return r;
}

}  // namespace qkv::explain
