// A model `qkv train` made, in the terminal: what it is, its input and output, and the alignment
// of one decoder layer and head (Bahdanau et al. 2014, Figure 3: each output character lights up
// the source characters it was read from); a lookup model's phonebook; RNNsearch's worked step.
#include <cstdlib>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

// "dates model: 2 + 2 layers, 4 heads, d_model 64; trained 3000 steps, held-out accuracy 99.1%"
std::string model_line(const Run& run) {
  const ModelHeader& m = run.model;
  const bool rnn = m.family == "rnnsearch";
  std::string s = m.task + " model: ";
  if (rnn)
    s += "RNNsearch (Bahdanau et al. 2014)\n  bidirectional GRU encoder " +
         std::to_string(m.d_model / 2) + " + " + std::to_string(m.d_model / 2) +
         " units, GRU decoder " + std::to_string(m.d_model) + " units";
  else
    s += std::to_string(m.layers) + " + " + std::to_string(m.layers) + " layers, " +
         std::to_string(m.heads) + " heads, d_model " + std::to_string(m.d_model);
  const auto steps = m.metadata.find("qkv.steps");
  const auto accuracy = m.metadata.find("qkv.test_accuracy");
  if (steps != m.metadata.end() && accuracy != m.metadata.end())
    s += (rnn ? ";\n  trained " : "; trained ") + steps->second + " steps, held-out accuracy " +
         fixed(100 * std::atof(accuracy->second.c_str()), 1) + "%";
  return s + "\n\n";
}

}  // namespace

std::string render_seq2seq(const Run& run, const Seq2SeqView& view) {
  const bool rnn = run.model.family == "rnnsearch";
  const Tensor heads = alignment(run, view.layer);  // [H, steps, S]
  const std::vector<double> entropy = head_entropy(heads);
  const int64_t h = heads.dim(0), steps = heads.dim(1), n = heads.dim(2);
  const int64_t head = view.head.value_or(sharpest_head(entropy));
  std::string s = model_line(run);
  s += "  input   \"" + printable(run.text) + "\"\n  output  \"" + printable(run.output.decoded) +
       "\"" + (run.output.ended ? "" : " (no end token within the model's limit)") + "\n\n";
  if (rnn)
    s += "Additive attention, the alignment of Bahdanau et al.'s Figure 3:\n";
  else
    s += "Cross-attention of decoder layer " + std::to_string(view.layer) + ", head " +
         std::to_string(head) +
         (view.head ? "" : ", the sharpest of its " + std::to_string(h) + " (lowest entropy)") +
         ":\n";
  s += "where each output character looks in the input (row: output; column: input)\n\n";
  Tensor shown(Shape{steps, n}, DType::f64);
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t j = 0; j < n; ++j) shown.at<double>(t, j) = heads.at<double>(head, t, j);
  s += render_alignment(run.text, run.output.steps, shown, view.style);
  if (const std::optional<Phonebook> book = phonebook(run)) {
    s += "\nThe phonebook, read off the attention:\n";
    for (const std::string& line : phonebook_lines(*book)) s += "  " + line + "\n";
  }
  if (rnn) {
    s += "\n" + render_rnnsearch(run);
    s += "--json prints every weight; --html FILE the report.\n";
  } else if (!view.head) {
    s += "\nentropy by head (nats; 0: all on one character):";
    for (int64_t k = 0; k < h; ++k)
      s += "  h" + std::to_string(k) + " " + fixed(entropy[static_cast<std::size_t>(k)], 2);
    s += "\n--layer L --head H shows another; --json prints every weight.\n";
  }
  return s;
}

}  // namespace qkv::explain
