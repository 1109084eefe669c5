// explain/report/report.h — what the HTML report shows, whatever model made it: token lists and
// blocks of attention (BERT's self-attention; a trained encoder-decoder's encoder self-, decoder
// self- and cross-attention; one call of `qkv attend`), each block with its layers' per-head q, k,
// v and weights. html.h turns a Report into one self-contained page.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "explain/explained.h"
#include "models/seq2seq/seq2seq.h"
#include "qkv/tensor.h"

namespace qkv::explain {

struct ReportToken {
  std::string text;
  bool special = false;      // [CLS], [SEP], <s>, </s>: hidden by "hide special tokens"
  bool punctuation = false;  // hidden by "hide punctuation"
  int segment = 0;           // 0: sentence A, 1: sentence B (pairs)
};

struct ReportLayer {
  Tensor q;        // [H, n, d] the queries as the score function received them
  Tensor k;        // [Hk, m, d] the keys (query head h reads key head h·Hk/H)
  Tensor v;        // [Hk, m, dv] the values
  Tensor weights;  // [H, n, m] the attention weights (any dtype)
  // [H, n, m] the scores after scaling and masking. Undefined: the page computes them as
  // scale·q·k with the block's causal mask, and the weights as their softmax (the compact form a
  // long input needs); given: the page shows these and `weights` as they are.
  Tensor logits;
};

struct ReportBlock {
  std::string name;  // "self-attention", "cross-attention", ...
  std::string note;  // one line under the name: what asks and what answers
  std::vector<ReportToken> queries, keys;
  std::string score = "scaled_dot";  // scaled_dot, dot, general, additive, laplace, cosine, ...
  double scale = 1;                  // logits = scale · score(q, k)
  bool causal = false;               // key j > query i is masked (decoder self-attention)
  bool softmax = true;               // the weights are softmax(logits) (else as given)
  bool same_tokens = true;           // queries and keys are the same tokens (self-attention)
  std::vector<ReportLayer> layers;
};

struct Report {
  std::string title;                                       // "all-MiniLM-L6-v2"
  std::vector<std::pair<std::string, std::string>> texts;  // (label, text) shown on top
  std::vector<ReportBlock> blocks;
  int64_t focus = 0;            // the query selected first, in blocks[0]
  int64_t layer = 0, head = 0;  // the head selected first
};

// A BERT run with everything captured (explain::run): one self-attention block, every layer.
Report report_of(const Explained& e, int64_t focus, const std::string& title);

// A trained encoder-decoder on one source (Seq2Seq::capture): three blocks — the encoder's
// self-attention, the decoder's causal self-attention, and the cross-attention from the
// decoder's positions to the source — each with the logits and weights as computed.
Report report_of(const Seq2SeqCapture& c, const std::string& title);

}  // namespace qkv::explain
