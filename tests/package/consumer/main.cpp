// Uses the installed qkv through its public headers only, as an outside project would:
//   qkv/attention.h  one query against two keys with equal scores averages their values;
//   qkv/model.h      an untrained encoder-decoder, every attention layer captured;
//   qkv/model.h      that model saved, then opened again through the registry (open_model),
//                    which says what it is and what it can do;
//   qkv/explain.h    the opened model's run (explain::capture, the one record) as the HTML report
//                    and as JSON;
//   qkv/attend.h     one attention call step by step.
// Prints what check_find_package.cmake expects; exits 1 when something is off.
#include <qkv/attend.h>
#include <qkv/attention.h>
#include <qkv/explain.h>
#include <qkv/model.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

int main() {
  qkv::Tensor q = qkv::Tensor::from({1, 2}, {1.0f, 0.0f});
  qkv::Tensor k = qkv::Tensor::from({2, 2}, {0.0f, 1.0f, 0.0f, -1.0f});
  qkv::Tensor v = qkv::Tensor::from({2, 2}, {1.0f, 2.0f, 0.0f, 3.0f});
  qkv::AttentionResult r = qkv::attention(q, k, v, {.score = qkv::Score::dot});
  std::printf("out = %g %g\n", r.out.at<float>(0, 0), r.out.at<float>(0, 1));

  // model.h: a 1-layer, 2-head model of the "reverse" task, captured on one source.
  const qkv::Task task = qkv::make_task("reverse");
  qkv::Seq2SeqConfig config = qkv::config_for(task, 1, 2, 8);
  qkv::nn::Rng rng(7);
  const std::unique_ptr<qkv::Seq2Seq> model = qkv::make_seq2seq(config, rng);
  const qkv::Seq2SeqCapture c = model->capture("abc");
  const qkv::AttentionCapture& cross = c.cross.at(0);
  double row = 0;  // the first query's cross-attention weights over the source sum to 1
  for (int64_t j = 0; j < cross.weights.dim(-1); ++j) row += cross.weights.value(j);
  std::printf("capture: %zu source tokens, heads %lld, weights row sum %.6f\n",
              c.source_tokens.size(), static_cast<long long>(cross.weights.dim(1)), row);

  // model.h: saved and opened again through the registry, whatever the file is.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv-consumer-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  model->save(path);
  const qkv::Model opened = qkv::open_model(path);
  std::filesystem::remove(path);
  std::printf("registry: %s, family %s, %lld layer, %lld heads, translate %s\n",
              std::string(qkv::to_string(opened.kind())).c_str(), opened.info().family.c_str(),
              static_cast<long long>(opened.info().layers),
              static_cast<long long>(opened.info().heads),
              opened.can(qkv::Capability::translate) ? "yes" : "no");

  // explain.h: the opened model's run, as the report and as JSON; attend.h: a call step by step.
  const qkv::explain::Run run = qkv::explain::capture(opened, {.text = "abc"});
  const std::string page = qkv::explain::html_report(qkv::explain::report_of("tiny", run));
  const std::string json = qkv::explain::json_of(run);
  std::printf("run: %zu blocks, %zu tokens, json %s\n", run.blocks.size(), run.tokens.size(),
              json.rfind("{", 0) == 0 ? "yes" : "no");
  const qkv::explain::AttentionCall call{
      .q = q, .k = k, .v = v, .options = {.score = qkv::Score::dot}};
  const std::string steps =
      qkv::explain::explain_steps(call, qkv::explain::run_case(call), {.digits = 2});
  const bool html = page.rfind("<!doctype html>", 0) == 0;
  const bool softmax = steps.find("softmax") != std::string::npos;
  std::printf("explain: html %s, steps %s\n", html ? "yes" : "no", softmax ? "yes" : "no");
  return html && softmax && std::fabs(row - 1) < 1e-5 ? 0 : 1;
}
