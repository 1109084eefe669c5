#include "qkv/attend.h"

namespace qkv::explain {

double effective_scale(const AttentionCall& c) {
  return c.options.scale.value_or(default_scale(c.options.score, c.k.dim(-1)));
}

AttentionResult run_case(const AttentionCall& c) {
  AttentionOptions o = c.options;
  o.need_weights = o.need_logsumexp = o.need_scores = true;
  o.path = Path::reference;
  return attention(c.q, c.k, c.v, o);
}

}  // namespace qkv::explain
