// The lookup task's phonebook read off a trained model's attention: which encoder head binds each
// number to its name, which cross-attention head matches the name asked against the names listed,
// and how much of what that head reads back is the entry it matched — the SQL lookup
// `SELECT number FROM book WHERE name = 'b'`, learned from data.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "qkv/explain.h"
#include "qkv/explain_readings.h"
#include "qkv/explain_views.h"

namespace qkv::explain {
namespace {

const Block* block_named(const Run& run, const std::string& name) {
  for (const Block& b : run.blocks)
    if (b.name == name) return &b;
  return nullptr;
}

// ‖v_j‖ of key/value head `kv` ([1, Hkv, S, dv], float64).
double norm(const Tensor& v, int64_t kv, int64_t j) {
  double sum = 0;
  for (int64_t d = 0; d < v.dim(3); ++d) sum += std::pow(v.at<double>(0, kv, j, d), 2);
  return std::sqrt(sum);
}

// The binding: the encoder head whose numbers look hardest at the key just before them.
void bind(Phonebook& book, const std::vector<AttentionCapture>& encoder) {
  const auto entries = static_cast<double>(book.entries.size());
  double best = -1;
  for (std::size_t l = 0; l < encoder.size(); ++l) {
    const Tensor w = encoder[l].weights.to(DType::f64);  // [1, H, S, S]
    for (int64_t h = 0; h < w.dim(1); ++h) {
      double mean = 0;
      for (const PhonebookEntry& e : book.entries)
        mean += w.at<double>(0, h, e.at + 1, e.at) / entries;
      if (mean > best) best = mean, book.bind_layer = static_cast<int64_t>(l), book.bind_head = h;
    }
  }
  const Tensor w = encoder[static_cast<std::size_t>(book.bind_layer)].weights.to(DType::f64);
  for (const PhonebookEntry& e : book.entries)
    book.bind.push_back(w.at<double>(0, book.bind_head, e.at + 1, e.at));
}

// The match: the cross-attention head whose first output step (the number) puts the most weight
// on one entry (its key and its number); then what it reads back through the values.
void match(Phonebook& book, const std::vector<AttentionCapture>& cross) {
  double best = -1;
  for (std::size_t l = 0; l < cross.size(); ++l) {
    const Tensor w = cross[l].weights.to(DType::f64);  // [1, H, T, S]
    for (int64_t h = 0; h < w.dim(1); ++h)
      for (const PhonebookEntry& e : book.entries) {
        const double m = w.at<double>(0, h, 0, e.at) + w.at<double>(0, h, 0, e.at + 1);
        if (m > best) best = m, book.match_layer = static_cast<int64_t>(l), book.match_head = h;
      }
  }
  const AttentionCapture& c = cross[static_cast<std::size_t>(book.match_layer)];
  book.score = c.score;
  const Tensor w = c.weights.to(DType::f64), logits = c.logits.to(DType::f64),
               v = c.v.to(DType::f64);
  const int64_t h = book.match_head, kv = h * v.dim(1) / w.dim(1);
  std::vector<double> flow;
  for (const PhonebookEntry& e : book.entries) {
    double a = 0, f = 0;
    for (int64_t j = e.at; j <= e.at + 1; ++j) {
      a += w.at<double>(0, h, 0, j);
      f += w.at<double>(0, h, 0, j) * norm(v, kv, j);
    }
    book.weight.push_back(a);
    book.logit.push_back(logits.at<double>(0, h, 0, e.at + 1));
    flow.push_back(f);
  }
  double total = 0;
  for (int64_t j = 0; j < v.dim(2); ++j) total += w.at<double>(0, h, 0, j) * norm(v, kv, j);
  if (book.asked && total > 0) book.asked_share = flow[*book.asked] / total;
}

}  // namespace

std::optional<Phonebook> parse_phonebook(const std::string& s) {
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

std::optional<Phonebook> phonebook(const Run& run) {
  if (run.model.task != "lookup") return std::nullopt;
  std::optional<Phonebook> book = parse_phonebook(run.text);
  const Block* cross = run.blocks.empty() || run.blocks.front().kind != BlockKind::cross_attention
                           ? nullptr
                           : &run.blocks.front();
  const Block* encoder = block_named(run, "encoder self-attention");
  const bool additive = run.model.family == "rnnsearch";
  if (!book || cross == nullptr || cross->layers.empty() ||
      (!additive && (encoder == nullptr || encoder->layers.empty())))
    return std::nullopt;
  book->additive = additive;
  book->answer = run.output.decoded;
  if (!additive) bind(*book, encoder->layers);
  match(*book, cross->layers);
  return book;
}

}  // namespace qkv::explain
