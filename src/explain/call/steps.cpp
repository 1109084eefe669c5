// `qkv attend` output: the step-by-step explanation and the summary.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "qkv/attend.h"
#include "qkv/terminal.h"

namespace qkv::explain {
namespace {

// Element (i, j) of the trailing two dimensions of a tensor whose leading dimensions are all 1.
double at2(const Tensor& t, int64_t i, int64_t j) { return t.value(i * t.dim(-1) + j); }

std::vector<std::string> labels_or_default(const std::vector<std::string>& labels, int64_t n,
                                           const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& label : labels) out.push_back(printable(label));  // the user's text
  if (!labels.empty()) return out;
  for (int64_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

std::string matrix(const Tensor& t, const std::vector<std::string>& rows,
                   const std::vector<std::string>& columns, int digits) {
  Table table{rows, columns, {}};
  for (int64_t i = 0; i < t.dim(-2); ++i) {
    std::vector<std::string> cells;
    for (int64_t j = 0; j < t.dim(-1); ++j) cells.push_back(fixed(at2(t, i, j), digits));
    table.cells.push_back(std::move(cells));
  }
  return render(table);
}

std::string heading(int step, const std::string& title) {
  return "\nStep " + std::to_string(step) + " · " + title + "\n";
}

std::string section(const std::string& title) { return "\n" + title + "\n"; }

std::string score_formula(Score s) {
  switch (s) {
    case Score::scaled_dot:
      return "q·k, the dot product of query and key";
    case Score::dot:
      return "q·k, the dot product of query and key";
    case Score::general:
      return "qᵀ W k, a dot product through a learned matrix W";
    case Score::additive:
      return "vᵀ tanh(W_q q + W_k k), a one-layer network (Bahdanau)";
    case Score::laplace:
      return "−‖q − k‖₁, minus the L1 distance: nearer keys score higher";
    case Score::cosine:
      return "cos(q, k) = q·k / (‖q‖ ‖k‖), the angle only, not the length";
    case Score::uniform:
      return "0 for every key: no preference, a plain average";
  }
  return "";
}

std::string scale_text(const AttentionCall& c) {
  const double s = effective_scale(c);
  if (!c.options.scale && c.options.score == Score::scaled_dot)
    return "× 1/√d_k = 1/√" + std::to_string(c.k.dim(-1)) + " = " + short_number(s);
  return "× " + short_number(s) + (c.options.scale ? " (the scale given)" : " (the default)");
}

bool has_masking(const AttentionCall& c) {
  return c.options.mask.defined() || c.options.causal != Causal::none ||
         !c.options.key_lengths.empty();
}

// "out(he) = 0.86·v(Hans) + 0.09·v(Mary) + …", terms by weight, the negligible ones counted.
std::string weighted_sum(const std::string& query, const AttentionResult& r, int64_t i,
                         const std::vector<std::string>& keys, int digits) {
  const Tensor& weights = r.weights;
  const int64_t S = weights.dim(-1);
  std::vector<int64_t> order(S);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::abs(at2(weights, i, a)) > std::abs(at2(weights, i, b));
  });
  const double shown = 0.5 * std::pow(10.0, -digits);
  constexpr int kWidth = 94;
  const std::string head = "out(" + query + ") =";
  std::string line = head;
  int terms = 0, hidden = 0, masked = 0;
  for (int64_t j : order) {
    const double w = at2(weights, i, j);
    if (at2(r.logits, i, j) == -std::numeric_limits<double>::infinity()) {
      ++masked;
      continue;
    }
    if (!(std::abs(w) >= shown) && !std::isnan(w)) {
      ++hidden;
      continue;
    }
    const std::string sign = terms == 0 ? (w < 0 ? " −" : " ") : (w < 0 ? " − " : " + ");
    const std::string term = sign + fixed(std::abs(w), digits) + "·v(" + keys[j] + ")";
    // Wrap long sums under the first term, so they stay readable in 100 columns.
    const std::size_t newline = line.rfind('\n');
    const std::string current = newline == std::string::npos ? line : line.substr(newline + 1);
    if (terms > 0 && display_width(current) + display_width(term) > kWidth) {
      line += '\n';
      line.append(static_cast<std::size_t>(display_width(head) + 2), ' ');
    }
    line += term;
    ++terms;
  }
  if (terms == 0) line += " 0  (nothing to attend to)";
  if (hidden > 0 && terms > 0)
    line += "  (+ " + std::to_string(hidden) + " key" + (hidden > 1 ? "s" : "") +
            " with weight < " + fixed(shown, digits + 1) + ")";
  if (masked > 0) line += "  (" + std::to_string(masked) + " masked)";
  return line;
}

}  // namespace

bool fits_step_by_step(const AttentionCall& c) {
  constexpr int64_t kMaxTokens = 16;
  int64_t heads = 1;
  for (int d = 0; d < c.q.rank() - 2; ++d) heads *= c.q.dim(d);
  for (int d = 0; d < c.k.rank() - 2; ++d) heads *= c.k.dim(d) == 0 ? 0 : 1;
  return heads == 1 && c.q.dim(-2) <= kMaxTokens && c.k.dim(-2) <= kMaxTokens;
}

std::string explain_steps(const AttentionCall& c, const AttentionResult& r, const StepOptions& o) {
  const int dg = o.digits;
  const auto queries = labels_or_default(c.query_labels, c.q.dim(-2), "q");
  const auto keys = labels_or_default(c.key_labels, c.k.dim(-2), "k");
  const auto dims = [](const Tensor& t, const std::string& p) {
    return labels_or_default({}, t.dim(-1), p);
  };
  const auto value_columns = c.value_columns.empty() ? dims(c.v, "v") : c.value_columns;
  std::ostringstream s;
  int step = 1;

  if (!c.projections.empty() && !o.same_inputs_as_before) {
    s << section(
        "Projections: each token's vector times a matrix (learned in a model; here given)");
    const auto features =
        c.input_columns.empty() ? dims(c.projections[0].input, "x") : c.input_columns;
    for (const Projection& p : c.projections) {
      const auto& rows = p.result_name == "Q" ? queries : keys;
      s << "  " << p.result_name << " = " << p.input_name << " · " << p.weight_name << ", with "
        << p.input_name << " =\n"
        << matrix(p.input, rows, features, dg);
      s << "  and " << p.weight_name << " =\n"
        << matrix(p.weight, features, dims(p.weight, "d"), dg);
    }
  }
  if (o.same_inputs_as_before) {
    s << "\n  (the same Q, K and V as the run before)\n";
  } else {
    s << section("Inputs: one row per token");
    // Without projections the input features are the query and key dimensions themselves.
    const bool named = c.projections.empty() &&
                       static_cast<int64_t>(c.input_columns.size()) == c.q.dim(-1) &&
                       c.q.dim(-1) == c.k.dim(-1);
    s << "  Q, the queries (what each token is looking for)\n"
      << matrix(c.q, queries, named ? c.input_columns : dims(c.q, "d"), dg);
    s << "  K, the keys (what each token offers to be found by)\n"
      << matrix(c.k, keys, named ? c.input_columns : dims(c.k, "d"), dg);
    s << "  V, the values (what each token hands over when found)\n"
      << matrix(c.v, keys, value_columns, dg);
  }

  s << heading(step++, "scores  score(q, k) = " + score_formula(c.options.score));
  s << "  one row per query, one column per key\n" << matrix(r.scores, queries, keys, dg);

  s << heading(step++, "scaled scores  " + scale_text(c));
  if (has_masking(c)) {
    Tensor scaled = r.scores.to(DType::f64);
    for (int64_t i = 0; i < scaled.numel(); ++i) scaled.data<double>()[i] *= effective_scale(c);
    s << matrix(scaled, queries, keys, dg);
    s << heading(step++, "mask: added to the scaled scores; -inf where a query may not look");
  }
  s << matrix(r.logits, queries, keys, dg);

  const bool softmax = c.options.normalize == Normalize::softmax;
  s << heading(step++, softmax ? "softmax weights  w = exp(x) / Σ exp(x), each row sums to 1"
                               : "weights = the scaled scores (normalize none)");
  s << matrix(r.weights, queries, keys, dg);

  s << heading(step++, "output = weights · V  (each row mixes the value rows)");
  s << matrix(r.out, queries, value_columns, dg);

  s << heading(step++, "which values flowed where");
  for (int64_t i = 0; i < c.q.dim(-2); ++i)
    s << "  " << weighted_sum(queries[i], r, i, keys, dg) << "\n";
  return s.str();
}

std::string summarize(const AttentionCall& c, const std::vector<AttentionResult>& first,
                      const StepOptions& o) {
  std::ostringstream s;
  Shape out_shape = c.q.shape();
  out_shape.back() = c.v.dim(-1);
  s << "  query " << shape_str(c.q.shape()) << "  keys " << shape_str(c.k.shape()) << "  values "
    << shape_str(c.v.shape()) << "  →  out " << shape_str(out_shape) << "\n";
  s << "  score(q, k) = " << score_formula(c.options.score) << ", " << scale_text(c) << "\n";
  const int64_t L = c.q.dim(-2), S = c.k.dim(-2);
  int64_t heads = 1;
  for (int d = 0; d < c.q.rank() - 2; ++d) heads *= c.q.dim(d);
  const int64_t show_heads = static_cast<int64_t>(first.size());
  const int64_t show_queries = show_heads == 0 ? 0 : first[0].weights.dim(-2);
  const auto keys = labels_or_default(c.key_labels, S, "k");
  const auto queries = labels_or_default(c.query_labels, L, "q");
  s << "\n  top " << o.top << " keys of the first " << show_queries << " queries";
  s << (heads > 1 ? " in the first " + std::to_string(show_heads) + " of " + std::to_string(heads) +
                        " (batch, head) pairs"
                  : "")
    << ":\n";
  const int64_t Hq = c.q.rank() >= 3 ? c.q.dim(-3) : 1;
  int label_width = 0;
  for (int64_t i = 0; i < show_queries; ++i)
    label_width = std::max(label_width, display_width(clip(queries[i], 12)));
  for (int64_t h = 0; h < show_heads; ++h) {
    if (heads > 1) s << "  batch " << h / Hq << ", head " << h % Hq << "\n";
    for (int64_t i = 0; i < show_queries; ++i) {
      std::vector<int64_t> order(S);
      std::iota(order.begin(), order.end(), 0);
      const AttentionResult& r = first[h];
      const int64_t base = i * S;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return r.weights.value(base + a) > r.weights.value(base + b);
      });
      s << "    " << pad_right(clip(queries[i], 12), label_width) << " →";
      int listed = 0;
      for (int64_t j : order) {
        if (listed == o.top) break;
        if (r.logits.value(base + j) == -std::numeric_limits<double>::infinity()) continue;
        s << "  " << keys[j] << " " << fixed(r.weights.value(base + j), o.digits);
        ++listed;
      }
      if (listed == 0) s << "  (nothing to attend to)";
      s << "\n";
    }
  }
  if (heads > show_heads || L > show_queries) s << "  (--json or --weights for all of them)\n";
  return s.str();
}

}  // namespace qkv::explain
