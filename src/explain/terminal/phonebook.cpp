// The phonebook reading (readings/phonebook.cpp) as lines, for the terminal and the report alike.
#include "qkv/explain.h"

namespace qkv::explain {
namespace {

std::string two(double x) { return fixed(x, 2); }

std::string chars(char a, char b = 0) {
  std::string s(1, a);
  if (b != 0) s += b;
  return s;
}

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

void binding(const Phonebook& book, std::vector<std::string>& lines) {
  if (book.additive) {
    // No self-attention binds a number to its name: the forward GRU reads the name just before.
    lines.push_back("bind   the forward GRU reads each number right after its name, so the");
    lines.push_back("       number's annotation h_j carries both; the backward GRU reads the");
    lines.push_back("       question last and hands it to the decoder as s_0, the query");
    return;
  }
  lines.push_back("bind   encoder layer " + std::to_string(book.bind_layer) + ", head " +
                  std::to_string(book.bind_head) + ": each number attends to the key before it");
  std::string line = "      ";
  for (std::size_t e = 0; e < book.entries.size(); ++e) {
    if (e > 0 && e % 4 == 0) lines.push_back(line), line = "      ";
    line += "   " + chars(book.entries[e].number) + "→" + chars(book.entries[e].key) + " " +
            two(book.bind[e]);
  }
  lines.push_back(line);
}

}  // namespace

std::vector<std::string> phonebook_lines(const Phonebook& book) {
  std::vector<std::string> lines;
  const bool rnn = book.additive;
  binding(book, lines);
  // What the brackets hold is named once, the way the rest of the view names it: RNNsearch's
  // score e (its worked step's e_ij, at scale 1 the logit itself), a transformer's logit.
  const std::string number_score = rnn ? "e" : "logit";
  lines.push_back((rnn ? std::string("match  the additive attention")
                       : "match  decoder layer " + std::to_string(book.match_layer) + ", head " +
                             std::to_string(book.match_head)) +
                  ": the query '" + chars(book.query) + "' against each entry");
  if (rnn) {
    lines.push_back("       (its weight on name + number, and e, the number's score");
    lines.push_back("       v_a·tanh(W_a s_0 + U_a h_j) before the softmax)");
  } else {
    lines.push_back("       (its weight on name + number, and the number's logit " +
                    logit_formula(book.score) + ")");
  }
  std::string line = "      ";
  for (std::size_t e = 0; e < book.entries.size(); ++e) {
    const std::string entry = "   " + chars(book.entries[e].key, book.entries[e].number) + " " +
                              two(book.weight[e]) + " (" + number_score + " " +
                              fixed(book.logit[e], 1) + ")" + (book.asked == e ? " ←" : "");
    // Within 80 columns with the two the caller indents by.
    if (e > 0 && display_width(line + entry) > 78) lines.push_back(line), line = "      ";
    line += entry;
  }
  lines.push_back(line);
  if (book.asked) {
    const PhonebookEntry& e = book.entries[*book.asked];
    lines.push_back("value  " + fixed(100 * book.asked_share, 0) +
                    (rnn ? "% of what it reads back (Σ weight·‖h‖) is the entry \""
                         : "% of what that head reads back (Σ weight·‖v‖) is the entry \"") +
                    chars(e.key, e.number) + "\"");
    lines.push_back(
        "       the model answers \"" + book.answer + "\"" +
        (book.answer == chars(e.number) ? ": its number" : ", not its number " + chars(e.number)));
  } else {
    lines.push_back("value  no entry has the key '" + chars(book.query) +
                    "': the model answers \"" + book.answer + "\" anyway.");
  }
  lines.push_back("SQL    SELECT number FROM book WHERE name = '" + chars(book.query) + "'");
  if (rnn) {  // one set of vectors, h_j, is both the keys and the values; the score is additive
    lines.push_back("       query: s_0, carrying the name asked; keys and values: the same h_j,");
    lines.push_back("       a number's carrying its name; softmax over the additive scores e");
    lines.push_back("       makes the WHERE soft");
  } else {
    lines.push_back("       query: the name asked; keys: the names listed; values: the numbers;");
    lines.push_back("       softmax over the logits " + logit_formula(book.score) +
                    " makes the WHERE soft");
  }
  return lines;
}

}  // namespace qkv::explain
