// `qkv train`: the library plans, trains and saves; this file maps the fields of its errors to
// flags, throttles one progress line and writes the summary as text or JSON.

#include <iostream>

#include "memory.h"
#include "output.h"
#include "qkv/blas.h"
#include "qkv/files.h"
#include "qkv/terminal.h"
#include "qkv/threads.h"
#include "qkv/train.h"
#include "train/train.h"

namespace qkv::cli {

namespace {

std::string percent(double x, int digits = 1) { return fixed(100 * x, digits) + "%"; }

// On a terminal, one line rewritten (Progress::report's throttle, and at each evaluation); else
// (a log, a pipe) a line at each tenth of the run. The time shown is to the step limit when the
// run may stop early at its target.
ProgressFn progress_line(Progress& bar, const std::string& accuracy, const TrainOptions& o) {
  const bool tty = bar.terminal(), may_stop = o.target_accuracy <= 1;
  return [&bar, accuracy, tty, may_stop,
          every = std::max<int64_t>(1, o.steps / 10)](const TrainProgress& p) {
    const bool milestone = tty ? p.step == 1 || p.evaluated : p.step % every == 0;
    bar.report(step_counter(p.step, p.steps, tty) + "  loss " + fixed(p.loss, 3) + "  " + accuracy +
                   " " + percent(p.token_accuracy) + "  held-out " +
                   (p.eval_accuracy ? percent(*p.eval_accuracy) : std::string("—")) +
                   (may_stop ? rate_and_time_to_limit(p.step, p.steps, p.seconds)
                             : rate_and_eta(p.step, p.steps, p.seconds)),
               milestone);
  };
}

int train_planned(const TrainArgs& a) {
  const TrainPlan plan = plan_training({.task = a.task,
                                        .model = a.model,
                                        .layers = a.layers,
                                        .heads = a.heads,
                                        .d_model = a.d_model,
                                        .length = a.length,
                                        .latents = a.latents,
                                        .steps = a.steps,
                                        .batch_size = a.batch,
                                        .eval_every = a.eval_every,
                                        .test_examples = a.test_examples,
                                        .lr = a.lr,
                                        .target_accuracy = a.target,
                                        .seed = a.seed});
  const TrainOptions& o = plan.options;
  // Fails before training, not after minutes of it, when --out cannot be written or the model
  // and a batch's activations would not fit.
  check_outputs({{"--out", a.out}});
  require_memory(plan.bytes(), a.memory_limit, plan.what(), plan.smaller(flag_of));
  // All of the work on `threads` threads: the process's pool and OpenBLAS's own.
  const int threads = resolve_num_threads(a.threads.value_or(0));
  qkv::set_num_threads(threads);
  set_blas_threads(threads);
  const std::unique_ptr<Trainable> model = plan.make(o.seed);
  Progress bar;
  const TrainSummary s =
      train(*model, o, progress_line(bar, plan.model == "perceiver" ? "batch" : "tokens", o));
  bar.clear();
  try {
    if (!a.out.empty()) save_trained(*model, a.out, s);
  } catch (const Error& e) {
    throw Error("--out " + std::string(e.what()), e.kind());  // the message starts with the path
  }
  std::cout << (a.json ? summary_json(s, o, *model, threads, a.out) + "\n"
                       : summary_text(s, o, *model, threads, a.out));
  return 0;
}

}  // namespace

int run_train(const TrainArgs& args) {
  try {
    return train_planned(args);
  } catch (const FieldError& e) {
    throw Error(e.message(flag_of), e.kind());  // the library names fields, the command its flags
  }
}

}  // namespace qkv::cli
