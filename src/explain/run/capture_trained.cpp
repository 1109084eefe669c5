// explain::capture for the models qkv trains: an encoder-decoder (transformer, RNNsearch) greedy-
// decoding one source with every attention kept, and a Perceiver's latents over one input.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "explain/run/values.h"
#include "qkv/explain_run.h"

namespace qkv::explain {
namespace {

// A seq2seq model's tokens as the views show them: a space as "␣", <s> and </s> special.
std::vector<TokenInfo> seq2seq_tokens(const std::vector<std::string>& tokens, bool spans) {
  std::vector<TokenInfo> out;
  for (const std::string& t : tokens) {
    const bool special = t.size() > 2 && t.front() == '<' && t.back() == '>';
    const bool punctuation = t.size() == 1 && std::ispunct(static_cast<unsigned char>(t[0]));
    const auto at = static_cast<int64_t>(out.size());
    out.push_back({.text = t == " " ? "␣" : t,
                   .surface = t,
                   .begin = spans ? at : -1,
                   .end = spans ? at + 1 : -1,
                   .special = special,
                   .punctuation = punctuation});
  }
  return out;
}

Block trained_block(BlockKind kind, std::vector<AttentionCapture> layers, std::string name,
                    std::string note, std::vector<TokenInfo> queries, std::vector<TokenInfo> keys,
                    bool causal) {
  Block b{.kind = kind,
          .name = std::move(name),
          .note = std::move(note),
          .queries = std::move(queries),
          .keys = std::move(keys),
          .same_tokens = false,
          .causal = causal,
          .layers = std::move(layers)};
  const int64_t heads = b.heads(), kv = b.layers.empty() ? 0 : b.layers.front().k.dim(1);
  for (int64_t h = 0; h < heads; ++h) b.kv_head.push_back(kv > 0 ? h * kv / heads : h);
  return b;
}

}  // namespace

Run capture(Seq2Seq& model, const std::string& source, const std::string& name,
            const std::map<std::string, std::string>& metadata) {
  const Seq2SeqConfig& config = model.config();
  const Seq2SeqCapture c = model.capture(source);
  Run run;
  run.model = {.name = name,
               .family = std::string(to_string(c.architecture)),
               .task = config.task,
               .layers = c.layers,
               .heads = c.heads,
               .kv_heads = c.kv_heads,
               .head_dim = c.head_dim,
               .d_model = config.d_model,
               .metadata = metadata};
  run.text = c.source;
  run.tokens = seq2seq_tokens(c.source_tokens, true);
  run.output = {.decoded = c.output,
                .steps = c.output_tokens,
                .ended = !c.output_tokens.empty() && c.output_tokens.back() == "</s>"};
  // A decoder row is named by what it writes: position t reads inputs[0..t], writes outputs[t].
  const std::vector<TokenInfo> outputs = seq2seq_tokens(c.output_tokens, false);
  if (c.architecture == Seq2SeqArchitecture::rnnsearch) {
    // Bahdanau et al.'s one attention: no encoder or decoder self-attention to show.
    run.blocks.push_back(trained_block(
        BlockKind::cross_attention, c.cross, "additive attention (RNNsearch)",
        "each output step asks with the decoder's state s_{i−1} (query); the bidirectional GRU's "
        "annotations h_j of the source characters answer — they are the keys and also the values "
        "(no W_V): c_i = Σ_j α_ij h_j",
        outputs, run.tokens, false));
  } else {
    run.blocks.push_back(trained_block(BlockKind::cross_attention, c.cross, "cross-attention",
                                       "each output step (query) reads the source characters "
                                       "(keys, values) through the encoder",
                                       outputs, run.tokens, false));
    run.blocks.push_back(
        trained_block(BlockKind::self_attention, c.encoder, "encoder self-attention",
                      "every source character asks every other", run.tokens, run.tokens, false));
    run.blocks.push_back(trained_block(BlockKind::self_attention, c.decoder_self,
                                       "decoder self-attention",
                                       "each output step (named by what it writes) reads the "
                                       "tokens written before it (keys: the decoder's inputs)",
                                       outputs, seq2seq_tokens(c.target_tokens, false), true));
  }
  if (!run.blocks.front().layers.empty()) run.model.scale = run.blocks.front().layers[0].scale;
  add_values(model, run);  // each head's ‖W_O^h v_j‖ (values.cpp)
  return run;
}

Run capture(Perceiver& model, const PerceiverTask& task, const std::string& input,
            const std::string& name) {
  Run run;
  run.text = input;
  run.counted = task.counted();
  // need_weights: the cross-attention's weights are kept for cross_weights().
  const Tensor logits = model.forward({task.encode(input)}, /*need_weights=*/true).to(DType::f64);
  const int64_t classes = logits.dim(1);
  const double* z = logits.data<double>();  // softmax of the one row
  const double m = *std::max_element(z, z + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - m);
  for (int64_t c = 0; c < classes; ++c)
    run.output.probabilities.push_back(std::exp(z[c] - m) / sum);
  run.output.predicted = static_cast<int32_t>(std::max_element(z, z + classes) - z);

  const Tensor w = model.cross_weights().to(DType::f64);  // [1, H, N, L]
  const PerceiverConfig& config = model.config();
  run.model = {.name = name,
               .family = "perceiver",
               .task = config.task,
               .layers = 1,
               .heads = w.dim(1),
               .kv_heads = w.dim(1),
               .head_dim = config.d_model / std::max<int64_t>(w.dim(1), 1),
               .d_model = config.d_model};
  for (int64_t l = 0; l < w.dim(3); ++l)
    run.tokens.push_back({.text = input.substr(static_cast<std::size_t>(l), 1),
                          .surface = input.substr(static_cast<std::size_t>(l), 1),
                          .begin = l,
                          .end = l + 1});
  std::vector<TokenInfo> latents;
  for (int64_t n = 0; n < w.dim(2); ++n) latents.push_back({.text = "latent " + std::to_string(n)});
  Block b{.kind = BlockKind::latent,
          .name = "latents over the input",
          .note =
              "each learned latent query asks; every input position answers (keys and values "
              "from the input)",
          .queries = std::move(latents),
          .keys = run.tokens,
          .same_tokens = false,
          .layers = {AttentionCapture{.weights = w}}};
  for (int64_t h = 0; h < w.dim(1); ++h) b.kv_head.push_back(h);
  run.blocks.push_back(std::move(b));
  return run;
}

}  // namespace qkv::explain
