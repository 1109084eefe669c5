#include "attend_report.h"

namespace qkv::cli {
namespace {

// [L, D] and [H, L, D] as [1, 1, L, D] and [1, H, L, D].
Tensor as_batched(const Tensor& t) {
  const Tensor c = t.contiguous();
  if (c.rank() == 4) return c;
  return c.reshape(c.rank() == 3 ? Shape{1, c.dim(0), c.dim(1), c.dim(2)}
                                 : Shape{1, 1, c.dim(0), c.dim(1)});
}

// Batch entry b of [B, H, n, d] as [H, n, d].
Tensor entry(const Tensor& t, int64_t b) {
  return t.narrow(0, b, 1).contiguous().reshape(Shape{t.dim(1), t.dim(2), t.dim(3)});
}

std::vector<explain::ReportToken> labels(const std::vector<std::string>& given, int64_t n,
                                         const std::string& prefix) {
  std::vector<explain::ReportToken> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(
        {.text = given.empty() ? prefix + std::to_string(i) : given[static_cast<std::size_t>(i)]});
  return out;
}

std::string score_name(Score s) {
  std::string name(to_string(s));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

}  // namespace

explain::Report attend_report(const std::string& title, const std::vector<std::string>& story,
                              const std::vector<AttendCase>& cases,
                              const std::vector<AttentionResult>& results) {
  explain::Report report{.title = title};
  for (const std::string& line : story) report.texts.emplace_back("", line);
  for (std::size_t r = 0; r < cases.size(); ++r) {
    const AttendCase& c = cases[r];
    const Tensor q = as_batched(c.q), k = as_batched(c.k), v = as_batched(c.v);
    const Tensor w = as_batched(results[r].weights), z = as_batched(results[r].logits);
    for (int64_t b = 0; b < q.dim(0); ++b) {
      std::string name = cases.size() > 1 ? "run " + std::to_string(r + 1) : "attention";
      if (q.dim(0) > 1) name += ", batch " + std::to_string(b);
      explain::ReportBlock block{
          .name = name,
          .note = c.caption,
          .queries = labels(c.query_labels, q.dim(2), "q"),
          .keys = labels(c.key_labels, k.dim(2), "k"),
          .score = score_name(c.options.score),
          .scale = effective_scale(c),
          .softmax = c.options.normalize == Normalize::softmax,
          .same_tokens = false,
      };
      block.layers.push_back({.q = entry(q, b),
                              .k = entry(k, b),
                              .v = entry(v, b),
                              .weights = entry(w, b),
                              .logits = entry(z, b)});
      report.blocks.push_back(std::move(block));
    }
  }
  return report;
}

}  // namespace qkv::cli
