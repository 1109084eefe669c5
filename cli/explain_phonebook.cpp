#include "explain_phonebook.h"

#include <cmath>
#include <optional>

#include "text.h"

namespace qkv::cli {
namespace {

struct Entry {
  char key, number;
  int64_t at;  // the key's position; its number is at + 1
};

struct Phonebook {
  std::vector<Entry> entries;
  char query = 0;
  std::optional<std::size_t> asked;  // the entry whose key is the query
};

// "? b a3 b7 c1" → its query and entries; nullopt for anything else.
std::optional<Phonebook> parse(const std::string& s) {
  Phonebook p;
  if (s.size() < 6 || s[0] != '?' || s[1] != ' ' || !std::islower(static_cast<unsigned char>(s[2])))
    return std::nullopt;
  p.query = s[2];
  std::size_t i = 3;
  for (; i + 2 < s.size(); i += 3) {
    if (s[i] != ' ' || !std::islower(static_cast<unsigned char>(s[i + 1])) ||
        !std::isdigit(static_cast<unsigned char>(s[i + 2])))
      return std::nullopt;
    p.entries.push_back({s[i + 1], s[i + 2], static_cast<int64_t>(i + 1)});
  }
  if (i != s.size() || p.entries.empty()) return std::nullopt;
  for (std::size_t e = 0; e < p.entries.size(); ++e)
    if (p.entries[e].key == p.query) p.asked = e;
  return p;
}

std::string two(double x) { return fixed(x, 2); }

// A transformer head's logit, scale·score(q, k), in the notation of its score.
std::string logit_formula(Score score) {
  switch (score) {
    case Score::scaled_dot:
      return "q·k/√d_k";
    case Score::dot:
      return "q·k";
    default:
      return "scale·" + std::string(to_string(score)) + "(q, k)";
  }
}

}  // namespace

std::vector<std::string> phonebook_reading(const Seq2SeqCapture& c) {
  const std::optional<Phonebook> book = parse(c.source);
  const bool rnn = c.architecture == Seq2SeqArchitecture::rnnsearch;
  if (!book || (c.encoder.empty() && !rnn) || c.cross.empty()) return {};
  const std::vector<Entry>& entries = book->entries;
  std::vector<std::string> lines;
  if (rnn) {
    // No self-attention binds a number to its name: the forward GRU reads the name just before.
    lines.push_back("bind   the forward GRU reads each number right after its name, so the");
    lines.push_back("       number's annotation h_j carries both; the backward GRU reads the");
    lines.push_back("       question last and hands it to the decoder as s_0, the query");
  } else {
    // 1. The binding: the encoder head whose numbers look hardest at the key just before them.
    int64_t bind_layer = 0, bind_head = 0;
    double bind_best = -1;
    for (std::size_t l = 0; l < c.encoder.size(); ++l) {
      const Tensor w = c.encoder[l].weights.to(DType::f64);  // [1, H, S, S]
      for (int64_t h = 0; h < w.dim(1); ++h) {
        double mean = 0;
        for (const Entry& e : entries) mean += w.at<double>(0, h, e.at + 1, e.at) / entries.size();
        if (mean > bind_best) bind_best = mean, bind_layer = static_cast<int64_t>(l), bind_head = h;
      }
    }
    {
      const Tensor w = c.encoder[static_cast<std::size_t>(bind_layer)].weights.to(DType::f64);
      lines.push_back("bind   encoder layer " + std::to_string(bind_layer) + ", head " +
                      std::to_string(bind_head) + ": each number attends to the key before it");
      std::string line = "      ";
      for (std::size_t e = 0; e < entries.size(); ++e) {
        if (e > 0 && e % 4 == 0) lines.push_back(line), line = "      ";
        line += "   " + std::string(1, entries[e].number) + "→" + std::string(1, entries[e].key) +
                " " + two(w.at<double>(0, bind_head, entries[e].at + 1, entries[e].at));
      }
      lines.push_back(line);
    }
  }

  // 2. The match: the cross-attention head (output step 0, the number) that puts the most weight
  // on one entry (its key and its number).
  int64_t match_layer = 0, match_head = 0;
  double match_best = -1;
  for (std::size_t l = 0; l < c.cross.size(); ++l) {
    const Tensor w = c.cross[l].weights.to(DType::f64);  // [1, H, T, S]
    for (int64_t h = 0; h < w.dim(1); ++h)
      for (const Entry& e : entries) {
        const double m = w.at<double>(0, h, 0, e.at) + w.at<double>(0, h, 0, e.at + 1);
        if (m > match_best) match_best = m, match_layer = static_cast<int64_t>(l), match_head = h;
      }
  }
  const AttentionCapture& cross = c.cross[static_cast<std::size_t>(match_layer)];
  const Tensor w = cross.weights.to(DType::f64), logits = cross.logits.to(DType::f64),
               v = cross.v.to(DType::f64);
  const int64_t kv_head = match_head * v.dim(1) / w.dim(1);
  std::vector<double> weight, flow;
  double flow_sum = 0;
  for (const Entry& e : entries) {
    double a = 0, f = 0;
    for (int64_t j = e.at; j <= e.at + 1; ++j) {
      double norm = 0;
      for (int64_t d = 0; d < v.dim(3); ++d) norm += std::pow(v.at<double>(0, kv_head, j, d), 2);
      a += w.at<double>(0, match_head, 0, j);
      f += w.at<double>(0, match_head, 0, j) * std::sqrt(norm);
    }
    weight.push_back(a);
    flow.push_back(f);
  }
  for (int64_t j = 0; j < v.dim(2); ++j) {
    double norm = 0;
    for (int64_t d = 0; d < v.dim(3); ++d) norm += std::pow(v.at<double>(0, kv_head, j, d), 2);
    flow_sum += w.at<double>(0, match_head, 0, j) * std::sqrt(norm);
  }
  // What the brackets hold is named once, the way the rest of the view names it: RNNsearch's
  // score e (its worked step's e_ij, at scale 1 the logit itself), a transformer's logit.
  const std::string number_score = rnn ? "e" : "logit";
  lines.push_back((rnn ? std::string("match  the additive attention")
                       : "match  decoder layer " + std::to_string(match_layer) + ", head " +
                             std::to_string(match_head)) +
                  ": the query '" + std::string(1, book->query) + "' against each entry");
  if (rnn) {
    lines.push_back("       (its weight on name + number, and e, the number's score");
    lines.push_back("       v_a·tanh(W_a s_0 + U_a h_j) before the softmax)");
  } else {
    lines.push_back("       (its weight on name + number, and the number's logit " +
                    logit_formula(cross.score) + ")");
  }
  std::string line = "      ";
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const std::string entry = "   " + std::string(1, entries[e].key) +
                              std::string(1, entries[e].number) + " " + two(weight[e]) + " (" +
                              number_score + " " +
                              fixed(logits.at<double>(0, match_head, 0, entries[e].at + 1), 1) +
                              ")" + (book->asked == e ? " ←" : "");
    // Within 80 columns with the two the caller indents by.
    if (e > 0 && display_width(line + entry) > 78) lines.push_back(line), line = "      ";
    line += entry;
  }
  lines.push_back(line);
  if (book->asked) {
    const Entry& e = entries[*book->asked];
    const double share = flow_sum > 0 ? flow[*book->asked] / flow_sum : 0;
    lines.push_back("value  " + fixed(100 * share, 0) +
                    (rnn ? "% of what it reads back (Σ weight·‖h‖) is the entry \""
                         : "% of what that head reads back (Σ weight·‖v‖) is the entry \"") +
                    std::string(1, e.key) + std::string(1, e.number) + "\"");
    lines.push_back("       the model answers \"" + c.output + "\"" +
                    (c.output == std::string(1, e.number)
                         ? ": its number"
                         : ", not its number " + std::string(1, e.number)));
  } else {
    lines.push_back("value  no entry has the key '" + std::string(1, book->query) +
                    "': the model answers \"" + c.output + "\" anyway.");
  }
  lines.push_back("SQL    SELECT number FROM book WHERE name = '" + std::string(1, book->query) +
                  "'");
  if (rnn) {  // one set of vectors, h_j, is both the keys and the values; the score is additive
    lines.push_back("       query: s_0, carrying the name asked; keys and values: the same h_j,");
    lines.push_back("       a number's carrying its name; softmax over the additive scores e");
    lines.push_back("       makes the WHERE soft");
  } else {
    lines.push_back("       query: the name asked; keys: the names listed; values: the numbers;");
    lines.push_back("       softmax over the logits " + logit_formula(cross.score) +
                    " makes the WHERE soft");
  }
  return lines;
}

}  // namespace qkv::cli
