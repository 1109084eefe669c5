#include "qkv/attend.h"

namespace qkv::explain {
namespace {

// [L, D] and [H, L, D] as [1, 1, L, D] and [1, H, L, D].
Tensor as_batched(const Tensor& t) {
  const Tensor c = t.contiguous();
  if (c.rank() == 4) return c;
  return c.reshape(c.rank() == 3 ? Shape{1, c.dim(0), c.dim(1), c.dim(2)}
                                 : Shape{1, 1, c.dim(0), c.dim(1)});
}

std::vector<ReportToken> labels(const std::vector<std::string>& given, int64_t n,
                                const std::string& prefix) {
  std::vector<ReportToken> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(
        {.text = given.empty() ? prefix + std::to_string(i) : given[static_cast<std::size_t>(i)]});
  return out;
}

}  // namespace

Report report_of(const std::string& title, const std::vector<std::string>& story,
                 const std::vector<AttentionCall>& cases,
                 const std::vector<AttentionResult>& results) {
  Report report{.title = title, .source = ReportSource::given};
  for (const std::string& line : story) report.texts.emplace_back("", line);
  for (std::size_t r = 0; r < cases.size(); ++r) {
    const AttentionCall& c = cases[r];
    report.hand_projections |= !c.projections.empty();
    // The names of q's and k's numbers are the input's features only where no projection made
    // them (as the terminal's steps name them, explain/call/steps.cpp).
    const bool named = c.projections.empty() &&
                       static_cast<int64_t>(c.input_columns.size()) == c.q.dim(-1) &&
                       static_cast<int64_t>(c.input_columns.size()) == c.k.dim(-1);
    const bool values_named = static_cast<int64_t>(c.value_columns.size()) == c.v.dim(-1);
    // The page is given the logits and weights as computed (causal masking included in them).
    const AttentionCapture all{.score = c.options.score,
                               .scale = effective_scale(c),
                               .normalize = c.options.normalize,
                               .q = as_batched(c.q),
                               .k = as_batched(c.k),
                               .v = as_batched(c.v),
                               .logits = as_batched(results[r].logits),
                               .weights = as_batched(results[r].weights)};
    const Tensor& q = all.q;
    for (int64_t b = 0; b < q.dim(0); ++b) {
      std::string name = cases.size() > 1 ? "run " + std::to_string(r + 1) : "attention";
      if (q.dim(0) > 1) name += ", batch " + std::to_string(b);
      ReportBlock block{
          .name = name,
          .note = c.caption,
          .queries = labels(c.query_labels, q.dim(2), "q"),
          .keys = labels(c.key_labels, all.k.dim(2), "k"),
          .same_tokens = false,
          .key_features = named ? c.input_columns : std::vector<std::string>{},
          .value_features = values_named ? c.value_columns : std::vector<std::string>{},
      };
      block.layers.push_back(batch_entry(all, b));
      report.blocks.push_back(std::move(block));
    }
  }
  return report;
}

}  // namespace qkv::explain
