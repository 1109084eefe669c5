#include <cctype>

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

Report report_of(const Explained& e, int64_t focus, const std::string& title) {
  ReportBlock block{
      .name = "self-attention",
      .note = e.causal ? "each token asks (query); it and the tokens before it answer (key, value)"
                       : "every token asks (query) and every token answers (key, value)",
  };
  for (const TokenInfo& t : e.tokens)
    block.queries.push_back(
        {.text = t.text, .special = t.special, .punctuation = t.punctuation, .segment = t.segment});
  block.keys = block.queries;
  // The compact form: q, k, v and the weights; the page recomputes the logits.
  // A decoder's capture repeats each shared key/value head for its query heads; the page is given
  // the Hkv heads themselves, and names which query heads read each.
  const int64_t group = e.kv_heads > 0 ? e.heads / e.kv_heads : 1;
  for (const AttentionCapture& c : e.capture.layers) {
    AttentionCapture l = batch_entry(c, 0);
    l.scores = l.logits = l.head_out = Tensor();
    if (group > 1)
      for (Tensor* t : {&l.k, &l.v}) {
        const int64_t n = t->dim(1), d = t->dim(2);
        Tensor shared({e.kv_heads, n, d}, t->dtype());
        for (int64_t g = 0; g < e.kv_heads; ++g)
          for (int64_t i = 0; i < n * d; ++i)
            shared.data<float>()[g * n * d + i] = t->data<float>()[g * group * n * d + i];
        *t = shared;
      }
    block.layers.push_back(std::move(l));
  }
  if (group > 1) {  // the terminal's words: "h0–h2 read kv 0, h3–h5 read kv 1, ..."
    block.note += "; the " + std::to_string(e.heads) + " query heads of a layer share " +
                  std::to_string(e.kv_heads) + " key/value heads (grouped-query attention):";
    for (int64_t g = 0; g < e.kv_heads; ++g)
      block.note += std::string(g ? "," : "") + " h" + std::to_string(g * group) + "–h" +
                    std::to_string(g * group + group - 1) + " read kv " + std::to_string(g);
  }
  // Every decoder qkv reads (llama's architecture: SmolLM2, GGUF files) rotates q and k (RoPE).
  Report r{.title = title,
           .source = e.causal ? ReportSource::decoder : ReportSource::encoder,
           .focus = focus};
  const std::string cut =
      e.truncated ? " (truncated: the model read " + std::to_string(e.size()) + " tokens)" : "";
  if (e.pair) {
    r.texts.emplace_back("sentence A", e.text);
    r.texts.emplace_back("sentence B" + cut, e.text_b);
  } else {
    r.texts.emplace_back("text" + cut, e.text);
  }
  r.blocks.push_back(std::move(block));
  return r;
}

namespace {

std::vector<ReportToken> seq2seq_tokens(const std::vector<std::string>& tokens) {
  std::vector<ReportToken> out;
  for (const std::string& t : tokens) {
    const bool special = t.size() > 2 && t.front() == '<' && t.back() == '>';
    const bool punctuation = t.size() == 1 && std::ispunct(static_cast<unsigned char>(t[0]));
    out.push_back({.text = t == " " ? "␣" : t, .special = special, .punctuation = punctuation});
  }
  return out;
}

ReportBlock seq2seq_block(const std::vector<AttentionCapture>& layers, std::string name,
                          std::string note, std::vector<ReportToken> queries,
                          std::vector<ReportToken> keys) {
  ReportBlock block{.name = std::move(name),
                    .note = std::move(note),
                    .queries = std::move(queries),
                    .keys = std::move(keys),
                    .same_tokens = false};
  for (const AttentionCapture& a : layers) {
    AttentionCapture l = batch_entry(a, 0);
    l.scores = l.head_out = Tensor();
    block.layers.push_back(std::move(l));
  }
  return block;
}

}  // namespace

Report report_of(const Seq2SeqCapture& c, const std::string& title) {
  const std::vector<ReportToken> source = seq2seq_tokens(c.source_tokens);
  const std::vector<ReportToken> inputs = seq2seq_tokens(c.target_tokens);
  // A decoder row is named by what it writes: position t reads inputs[0..t], writes outputs[t].
  const std::vector<ReportToken> outputs = seq2seq_tokens(c.output_tokens);
  const bool rnnsearch = c.architecture == Seq2SeqArchitecture::rnnsearch;
  Report r{.title = title, .source = rnnsearch ? ReportSource::rnnsearch : ReportSource::seq2seq};
  r.texts.emplace_back("input", c.source);
  const bool ended = !c.output_tokens.empty() && c.output_tokens.back() == "</s>";
  r.texts.emplace_back(ended ? "output" : "output (no end token within the model's limit)",
                       c.output);
  if (rnnsearch) {
    // Bahdanau et al.'s one attention: no encoder or decoder self-attention to show.
    r.blocks.push_back(seq2seq_block(
        c.cross, "additive attention (RNNsearch)",
        "each output step asks with the decoder's state s_{i−1} (query); the bidirectional GRU's "
        "annotations h_j of the source characters answer — they are the keys and also the values "
        "(no W_V): c_i = Σ_j α_ij h_j",
        outputs, source));
    r.layer = 0;
    return r;
  }
  r.blocks.push_back(seq2seq_block(c.cross, "cross-attention",
                                   "each output step (query) reads the source characters (keys, "
                                   "values) through the encoder",
                                   outputs, source));
  r.blocks.push_back(seq2seq_block(c.encoder, "encoder self-attention",
                                   "every source character asks every other", source, source));
  r.blocks.push_back(seq2seq_block(c.decoder_self, "decoder self-attention",
                                   "each output step (named by what it writes) reads the tokens "
                                   "written before it (keys: the decoder's inputs)",
                                   outputs, inputs));
  r.layer = c.layers - 1;
  return r;
}

}  // namespace qkv::explain
