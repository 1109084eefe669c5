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

struct ReportBlock {
  std::string name;  // "self-attention", "cross-attention", ...
  std::string note;  // one line under the name: what asks and what answers
  std::vector<ReportToken> queries, keys;
  bool same_tokens = true;  // queries and keys are the same tokens (self-attention)
  // One per layer, one batch entry each: q [H, n, d], k [Hk, m, d] (query head h reads key head
  // h·Hk/H), v [Hk, m, dv], weights [H, n, m] (any dtype). logits [H, n, m] undefined: the page
  // computes them as scale·q·k with the first layer's causal mask, and the weights as their
  // softmax (the compact form a long input needs); given: the page shows these and the weights as
  // they are. The first layer's score, scale, causal and normalize describe the block.
  std::vector<AttentionCapture> layers;
};

struct Report {
  std::string title;                                       // "all-MiniLM-L6-v2"
  std::vector<std::pair<std::string, std::string>> texts;  // (label, text) shown on top
  std::vector<ReportBlock> blocks;
  int64_t focus = 0;            // the query selected first, in blocks[0]
  int64_t layer = 0, head = 0;  // the head selected first
};

// Batch entry b of a capture of [B, H, ·, ·] tensors, as [H, ·, ·] (score, scale, mask kept).
AttentionCapture batch_entry(const AttentionCapture& capture, int64_t b);

// A BERT run with everything captured (explain::run): one self-attention block, every layer.
Report report_of(const Explained& e, int64_t focus, const std::string& title);

// A trained encoder-decoder on one source (Seq2Seq::capture): three blocks — the encoder's
// self-attention, the decoder's causal self-attention, and the cross-attention from the
// decoder's positions to the source — each with the logits and weights as computed.
Report report_of(const Seq2SeqCapture& c, const std::string& title);

}  // namespace qkv::explain
