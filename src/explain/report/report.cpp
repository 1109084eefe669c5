
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
    l.scores = l.logits = l.head_out = Tensor();
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
                  std::to_string(kv_heads) + " key/value heads (grouped-query attention):";
    for (int64_t g = 0; g < kv_heads; ++g)
      block.note += std::string(g ? "," : "") + " h" + std::to_string(g * group) + "–h" +
                    std::to_string(g * group + group - 1) + " read kv " + std::to_string(g);
  }
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

}  // namespace

Report report_of(const std::string& title, const Run& run, int64_t focus) {
  if (run.model.family == "perceiver")
    throw Error("report_of: a Perceiver's run has a page of its own; expected perceiver_html");
  if (!run.blocks.empty() && run.blocks.front().kind == BlockKind::cross_attention)
    return trained_report(title, run);
  return sentence_report(title, run, focus);
}

}  // namespace qkv::explain
