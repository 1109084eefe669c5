// explain::read_circuit: one head's QK and OV tables over chosen tokens, and the composers of
// the run's induction heads — what `qkv explain --circuit L.H` shows.
#include <algorithm>

#include "qkv/explain_circuits.h"
#include "qkv/explain_run.h"
#include "qkv/terminal.h"

namespace qkv::explain {

Circuit read_circuit(const ResidualModel& m, const Run& run, const CircuitRequest& request) {
  std::vector<int32_t> ids;
  if (request.tokens.empty()) {
    for (const TokenInfo& t : run.tokens)
      if (std::find(ids.begin(), ids.end(), t.id) == ids.end()) ids.push_back(t.id);
  } else {
    for (const std::string& text : split_commas(request.tokens)) {
      const std::vector<int32_t> one = m.tokenize_piece(text);
      if (one.size() != 1)
        throw Error("--tokens item \"" + clip(printable(text), 40) + "\" is " +
                        std::to_string(one.size()) +
                        " tokens; expected one token each, e.g. --tokens \" Paris, France\"",
                    Error::Kind::invalid_argument);
      ids.push_back(one.front());
    }
  }
  Circuit c{.qk = qk_table(m, request.layer, request.head, ids, {.offset = request.offset}),
            .ov = ov_table(m, request.layer, request.head, ids, {.outputs = ids, .top = 3})};
  c.composers = top_composers(m, head_roles(run).induction, 3);
  return c;
}

std::string circuit_text(const Circuit& c) {
  return qk_text(c.qk) + "\n" + ov_text(c.ov) + "\n" + composers_text(c.composers);
}

nlohmann::json circuit_json(const Circuit& c) {
  return {{"qk", qk_json(c.qk)}, {"ov", ov_json(c.ov)}, {"composers", composers_json(c.composers)}};
}

}  // namespace qkv::explain
