// The "How to read this page" box: one for every page, saying only what is true of its model.
#include "explain/report/legend.h"

#include <string>

namespace qkv::explain {
namespace {

// Every page: what attention does, whatever computes the scores.
constexpr const char* kWhatAttentionDoes =
    "<p>Attention lets each query gather what it needs from a set of keys and values. For one "
    "query: score every key against it, turn the scores into weights (a softmax makes them sum to "
    "1), and return Σ weight·v, the values mixed by those weights. Think of a search engine: your "
    "query is compared with every page's key (its title), and you get back the pages' values "
    "(their content), mixed by how well each matched.</p>";

std::string what_made_it(const LegendOptions& o) {
  switch (o.source) {
    case ReportSource::encoder:
      return "<p><b>On this page: a learned encoder</b> (BERT-style). In every layer each head "
             "has three learned matrices that make, from a token's current vector x, a "
             "<b>query</b> q = W<sub>Q</sub>x (what the token looks for), a <b>key</b> "
             "k = W<sub>K</sub>x (what it can be found by) and a <b>value</b> v = W<sub>V</sub>x "
             "(what it hands over when found). The score is q·k ÷ √d<sub>k</sub>, so that scores "
             "do not grow with the vectors' length. Every token reads every token, before and "
             "after it. The matrices are separate so a token can look for something different "
             "from what it offers: \"it\" may look for a noun while being found as a pronoun; "
             "each head has its own three, so each head can look for something else.</p>";
    case ReportSource::decoder:
      return "<p><b>On this page: a decoder-only language model.</b> Each head's learned "
             "matrices make a query q = W<sub>Q</sub>x, a key k = W<sub>K</sub>x and a value "
             "v = W<sub>V</sub>x from a token's vector x; then <b>RoPE</b> (rotary position "
             "embedding) turns each pair of q's and k's numbers by an angle proportional to the "
             "token's position, so that q·k depends on how far apart the two tokens are: the "
             "model's only sense of order. The step view shows q and k after the rotation. The "
             "score is q·k ÷ √d<sub>k</sub>. <b>Causal</b>: a token reads only itself and the "
             "tokens before it; the keys after it are masked (score −∞, weight 0). Several query "
             "heads may share one key/value head (grouped-query attention): the line below this "
             "box says which.</p>";
    case ReportSource::seq2seq:
      return "<p><b>On this page: an encoder-decoder transformer trained by qkv.</b> Each head's "
             "learned matrices make a query q = W<sub>Q</sub>x, a key k = W<sub>K</sub>x and a "
             "value v = W<sub>V</sub>x from a token's vector x; sinusoidal positions were added "
             "to the token vectors before the first layer. The score is q·k ÷ "
             "√d<sub>k</sub>. Three attentions, a button each: the cross-attention (each output "
             "step asks, the source characters answer through the encoder), the encoder's "
             "self-attention (every source character reads every other) and the decoder's causal "
             "self-attention (each output step reads the steps before it).</p>";
    case ReportSource::rnnsearch:
      return "<p><b>On this page: RNNsearch</b> (Bahdanau, Cho and Bengio 2014), attention "
             "before the transformer. The <b>query</b> is the decoder's state s<sub>i−1</sub> "
             "before it writes output i; the <b>keys</b> are the encoder's annotations "
             "h<sub>j</sub> of the source characters (a bidirectional GRU's two states side by "
             "side), and <b>the values are the same vectors</b>: there is no W<sub>V</sub>, so "
             "what a step matches on is what it reads. The score is <b>additive</b>, not a dot "
             "product: e<sub>ij</sub> = v<sub>a</sub>·tanh(W<sub>a</sub>s<sub>i−1</sub> + "
             "U<sub>a</sub>h<sub>j</sub>), where the learned W<sub>a</sub> and U<sub>a</sub> "
             "play W<sub>Q</sub>'s and W<sub>K</sub>'s parts; nothing is divided by "
             "√d<sub>k</sub>. Then the same softmax and weighted sum: the context "
             "c<sub>i</sub> = Σ<sub>j</sub> α<sub>ij</sub>h<sub>j</sub>. One attention, one "
             "layer, one head.</p>";
    case ReportSource::given: {
      std::string s =
          "<p><b>On this page: no model.</b> Q, K and V are given as they are, written into a "
          "worked example or read from files: no learned matrix made them";
      if (o.hand_projections)
        s += "; where an example builds them from inputs (Q = X·W<sub>Q</sub>), its matrices "
             "were written by hand";
      s += ". Each run (a button each, when there are several) has its own score, scale and "
           "normalization, and the step view spells them out.";
      if (o.features)
        s += " The step view names the numbers: the features of q and k, and the parts of v.";
      return s + "</p>";
    }
    case ReportSource::perceiver:
      return "<p><b>On this page: a Perceiver</b> (Jaegle et al. 2021). A few <b>latents</b>, "
             "learned vectors that are the same for every input, are the queries; the long "
             "input gives the keys and values, k = W<sub>K</sub>x and v = W<sub>V</sub>x of "
             "each symbol's vector (its embedding plus its position). Each latent's softmax "
             "spreads a weight of 1 over all L positions, so the cross-attention costs N·L for N "
             "latents, not the L² of self-attention over the input. A uniform look would give "
             "each position 1/L, and the c positions of the counted symbol together c/L; the "
             "table's \"× uniform\" says how many times that a latent gathers. The latents then "
             "attend to each other, and their mean gives the count.</p>";
  }
  return "";
}

// How positions are counted, said once on the page (the terminal's RNNsearch step counts from 1).
std::string counting(const LegendOptions& o) {
  if (o.source == ReportSource::perceiver)
    return "<p>Latents and positions count from 0, as in the terminal.</p>";
  std::string s = "<p>Tokens, positions, layers and heads count from 0 on this page";
  if (o.source == ReportSource::rnnsearch)
    s += "; the paper and the terminal's worked step count from 1, so output 0 and key 3 here "
         "are i = 1 and h<sub>4</sub> there";
  return s + ".</p>";
}

std::string how_to_use(const LegendOptions& o) {
  if (o.source == ReportSource::perceiver)
    return "<p class=\"mute\">Hover the heatmap (or Tab to it and press the arrow keys) for one "
           "weight; the menu above it shows one head or the heads' mean.</p>";
  return std::string("<p class=\"mute\">Click (or Tab to and press Enter on) a token") +
         (o.grid ? ", a head in the grid" : "") +
         " or a heatmap row; arrow keys move inside the heatmap" + (o.grid ? " and the grid" : "") +
         ". Hover a token in the line view to isolate its lines.</p>";
}

}  // namespace

const char* source_name(ReportSource source) {
  switch (source) {
    case ReportSource::encoder:
      return "encoder";
    case ReportSource::decoder:
      return "decoder";
    case ReportSource::seq2seq:
      return "seq2seq";
    case ReportSource::rnnsearch:
      return "rnnsearch";
    case ReportSource::given:
      return "given";
    case ReportSource::perceiver:
      return "perceiver";
  }
  return "given";
}

std::string legend_html(const LegendOptions& options) {
  return std::string("<details class=\"legend\" id=\"legend\" open data-source=\"") +
         source_name(options.source) + "\">\n  <summary>How to read this page</summary>\n  " +
         kWhatAttentionDoes + "\n  " + what_made_it(options) + "\n  " + counting(options) + "\n  " +
         how_to_use(options) + "\n</details>\n";
}

}  // namespace qkv::explain
