
#include "qkv/explain.h"

namespace qkv::explain {

Tensor unbatch(const Tensor& t) {
  if (!t.defined()) return t;
  Shape shape(t.shape().begin() + 1, t.shape().end());
  return t.contiguous().reshape(shape);
}

AttentionCapture batch_entry(const AttentionCapture& c, int64_t b) {
  const auto entry = [b](const Tensor& t) {
    return t.defined() ? unbatch(t.narrow(0, b, 1)) : Tensor();
  };
  AttentionCapture e = c;
  for (Tensor* t : {&e.q, &e.k, &e.v, &e.scores, &e.logits, &e.weights, &e.head_out})
    *t = entry(*t);
  return e;
}

namespace {

// A sentence's block as the page gets it: q, k, v and the weights (the page recomputes the
// logits). A decoder's capture repeats each shared key/value head for its query heads; the page
// is given the Hkv heads themselves, and the note names which query heads read each.
ReportBlock sentence_block(const Run& run) {
  ReportBlock block = run.blocks.front();
  const int64_t heads = run.model.heads, kv_heads = run.model.kv_heads;
  const int64_t group = kv_heads > 0 ? heads / kv_heads : 1;
  for (AttentionCapture& l : block.layers) {
    l = batch_entry(l, 0);
    // The page recomputes the logits from q and k under the causal mask; a layer whose mask hides
    // more (Gemma's sliding window) keeps its own.
    l.scores = l.head_out = Tensor();
    if (!l.mask.defined()) l.logits = Tensor();
    if (group > 1)
      for (Tensor* t : {&l.k, &l.v}) {
        const int64_t n = t->dim(1), d = t->dim(2);
        Tensor shared({kv_heads, n, d}, t->dtype());
        for (int64_t g = 0; g < kv_heads; ++g)
          for (int64_t i = 0; i < n * d; ++i)
            shared.data<float>()[g * n * d + i] = t->data<float>()[g * group * n * d + i];
        *t = shared;
      }
  }
  if (group > 1) {  // the terminal's words: "h0–h2 read kv 0, h3–h5 read kv 1, ..."
    block.note += "; the " + std::to_string(heads) + " query heads of a layer share " +
                  std::to_string(kv_heads) +
                  (kv_heads == 1 ? " key/value head" : " key/value heads") +
                  " (grouped-query attention):";
    for (int64_t g = 0; g < kv_heads; ++g)
      block.note += std::string(g ? "," : "") + " h" + std::to_string(g * group) + "–h" +
                    std::to_string(g * group + group - 1) + " read kv " + std::to_string(g);
  }
  if (!run.model.features.empty()) {  // what the decoder's architecture does (qwen2's biases, ...)
    block.note += "; " + run.model.family + ":";
    for (std::size_t i = 0; i < run.model.features.size(); ++i)
      block.note += (i ? "; " : " ") + run.model.features[i];
  }
  if (!run.model.weights.empty()) block.note += "; weights: " + run.model.weights;
  return block;
}

Report sentence_report(const std::string& title, const Run& run, int64_t focus) {
  // Every decoder qkv reads (llama's architecture: SmolLM2, GGUF files) rotates q and k (RoPE).
  Report r{.title = title,
           .source = run.causal() ? ReportSource::decoder : ReportSource::encoder,
           .focus = focus};
  const std::string cut =
      run.truncated ? " (truncated: the model read " + std::to_string(run.size()) + " tokens)" : "";
  if (run.pair) {
    r.texts.emplace_back("sentence A", run.text);
    r.texts.emplace_back("sentence B" + cut, run.text_b);
  } else {
    r.texts.emplace_back("text" + cut, run.text);
  }
  r.blocks.push_back(sentence_block(run));
  const HeadPick first = suggested_head(run, focus, picks(run, focus, 1));
  r.layer = first.layer;
  r.head = first.head;
  return r;
}

// A trained model's blocks carry the logits and weights as computed.
Report trained_report(const std::string& title, const Run& run) {
  const bool rnnsearch = run.model.family == "rnnsearch";
  Report r{.title = title, .source = rnnsearch ? ReportSource::rnnsearch : ReportSource::seq2seq};
  r.texts.emplace_back("input", run.text);
  r.texts.emplace_back(
      run.output.ended ? "output" : "output (no end token within the model's limit)",
      run.output.decoded);
  if (const std::optional<Phonebook> book = phonebook(run))
    for (const std::string& line : phonebook_lines(*book)) r.texts.emplace_back("phonebook", line);
  for (ReportBlock block : run.blocks) {
    for (AttentionCapture& l : block.layers) {
      l = batch_entry(l, 0);
      l.scores = l.head_out = Tensor();
    }
    r.blocks.push_back(std::move(block));
  }
  r.layer = rnnsearch ? 0 : run.model.layers - 1;
  return r;
}

// What each latent gathers, as the terminal's table has it (render_perceiver): its words, its
// columns, latent_table's strings.
ReportTable latents_table(const Run& run, const Gathers& g, const LatentTable& t) {
  std::string c = "'";  // (not "'" + std::string: GCC 12 warns a false -Wrestrict on it)
  c += run.counted;
  c += '\'';
  ReportTable table{
      .title = "What each latent gathers",
      .intro = "Each latent's cross-attention weight on the " + c +
               " (all heads' mean, and how many times a uniform look's " + t.uniform_share +
               "; then per head), how many positions it spreads over (exp entropy), and the "
               "positions it weighs most.",
      .columns = {"on " + c, "× uniform"},
      .bar_at = 2};
  for (int64_t h = 0; h < g.heads; ++h) table.columns.push_back("head " + std::to_string(h));
  table.columns.insert(table.columns.end(), {"spread", "top"});
  for (const LatentRow& r : t.rows) {
    table.rows.push_back(r.label);
    std::vector<std::string> cells = {r.counted, r.times_uniform};
    cells.insert(cells.end(), r.per_head.begin(), r.per_head.end());
    std::string top;
    for (const std::string& p : r.top) top += (top.empty() ? "" : " ") + p;
    cells.insert(cells.end(), {r.spread, top});
    table.cells.push_back(std::move(cells));
    table.bars.push_back(r.bar);
  }
  return table;
}

}  // namespace

Report report_of(const std::string& title, const Run& run, const Gathers& g) {
  if (run.model.family != "perceiver" || run.blocks.size() != 1 ||
      run.blocks.front().kind != BlockKind::latent)
    throw Error("report_of with gathers: " + run.model.name + " is a " + run.model.family +
                "'s run; expected a Perceiver's (one latent block)");
  const LatentTable t = latent_table(run, g);
  const std::string counted(1, run.counted);
  Report r{.title = title, .source = ReportSource::perceiver, .marked_key = counted};
  // The terminal's words (render_perceiver): the input, how many it holds, the prediction.
  r.texts.emplace_back("input, " + grouped(g.length) + " symbols", run.text);
  r.texts.emplace_back("count", std::to_string(g.count) + " '" + counted + "'");
  const int32_t predicted = run.output.predicted;
  r.texts.emplace_back(
      "prediction",
      std::to_string(predicted) + " (p = " + t.probability + "), " +
          (predicted == g.count ? "right" : "wrong: the count is " + std::to_string(g.count)));
  ReportBlock block = run.blocks.front();  // its weights only: [H, N, L]
  for (AttentionCapture& l : block.layers) l = batch_entry(l, 0);
  r.blocks.push_back(std::move(block));
  r.tables.push_back(latents_table(run, g, t));
  return r;
}

Report report_of(const std::string& title, const Run& run, int64_t focus) {
  if (run.model.family == "perceiver") return report_of(title, run, gathers(run, 3));
  if (!run.blocks.empty() && run.blocks.front().kind == BlockKind::cross_attention) {
    Report r = trained_report(title, run);
    r.lens = lens_json(run);  // a step's lens (--step), when asked
    return r;
  }
  Report r = sentence_report(title, run, focus);
  r.lens = lens_json(run);
  return r;
}

}  // namespace qkv::explain
