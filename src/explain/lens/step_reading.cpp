// explain::read_step: the causal lens of one output step of an encoder–decoder transformer.
#include "qkv/explain_lens.h"
#include "qkv/seq2seq.h"
#include "qkv/terminal.h"

namespace qkv::explain {

CausalReading read_step(Seq2Seq& model, const std::string& source,
                        const std::vector<std::string>& outputs, int64_t step,
                        const LensRequest& request, const OnProgress& progress) {
  const auto steps = static_cast<int64_t>(outputs.size());
  if (step < 0 || step >= steps)
    throw Error("output step " + std::to_string(step + 1) + " of \"" + clip(source, 40) +
                    "\"; its decoding has steps 1 to " + std::to_string(steps),
                Error::Kind::invalid_argument);
  const std::shared_ptr<const ResidualModel> decoder = model.residual(source);
  // Position t reads <s> and the outputs before t, and writes output t.
  std::vector<int32_t> ids{Vocabulary::kBos};
  for (int64_t t = 0; t < step; ++t) {
    const std::vector<int32_t> one = decoder->tokenize(outputs[static_cast<std::size_t>(t)]);
    ids.insert(ids.end(), one.begin(), one.end());
  }
  const std::shared_ptr<const ResidualModel> corrupted =
      request.corrupt.empty() ? nullptr : model.residual(request.corrupt);
  CausalReading r = read_causal(decoder, ids, request, progress, corrupted);
  r.step = step;
  for (int64_t l = 0; l < decoder->layers();
       ++l)  // capture(Seq2Seq)'s blocks: cross, encoder, decoder
    r.captured_at[static_cast<std::size_t>(l)] = {l % 2 == 0 ? 2 : 0, l / 2};
  return r;
}

}  // namespace qkv::explain
