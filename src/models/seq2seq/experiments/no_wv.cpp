// `qkv experiment no-wv`: identity W_V and no W_O against learned ones.
#include <string>

#include "runner.h"

namespace qkv::experiments {

ExperimentResult no_wv(Runner& run) {
  const ExperimentOptions& o = run.options;
  ExperimentResult r{.name = "no-wv",
                     .question =
                         "Why a W_V at all? With identity W_V (and no W_O) a head can only "
                         "average the raw inputs it attends to."};
  // sort: each output must carry a symbol found by content, so what the values carry matters.
  // (lookup would be the phonebook itself, but our models sit on a plateau near 35% there for
  // thousands of steps whatever the values.)
  Setup s = sequence_setup("sort", o.quick);
  r.setup = setup_str(s) + "; sorting must carry each found symbol back through the values.";
  r.columns = {"values", "test accuracy", "steps to 99%", "parameters"};
  auto params = [&](const nn::MultiHeadAttentionOptions& a) {
    Seq2SeqConfig c = config_for(make_task(s.task), s.layers, s.heads, s.d_model);
    c.attention = a;
    return make_model(c, 1)->parameter_count();
  };
  run.runs = 2 * static_cast<int64_t>(s.seeds.size());
  const Summary learned = train_seeds(s, {}, run, "learned W_V, W_O");
  const Summary identity = train_seeds(s, {.identity_v = true}, run, "identity W_V, no W_O");
  r.rows = {{"learned W_V, W_O", pct(learned.accuracy), steps_str(learned.reached),
             std::to_string(params({}))},
            {"identity W_V, no W_O", pct(identity.accuracy), steps_str(identity.reached),
             std::to_string(params({.identity_v = true}))}};
  r.reading = "Learned values reach " + pct(learned.accuracy) + ", identity values " +
              pct(identity.accuracy) +
              ". The keys decide where to look; W_V decides what is carried back. Without it, "
              "each head returns a weighted average of the very vectors it matched on, so the "
              "information used for matching and the information delivered are the same — and "
              "all heads deliver the same subspace, which W_O would otherwise recombine.";
  return r;
}

}  // namespace qkv::experiments
