// `qkv bench model --model smollm2`: a decoder language model end to end, as llama.cpp's
// llama-bench measures one — prompt processing (a 512-token prompt in one pass: tokens/s) and
// text generation (128 tokens, greedy, one at a time with the KV cache: tokens/s), on the
// model's weights as --weights keeps them (the file's blocks, or float32). The fused attention path is checked against the float64 reference
// attention on the same weights first. bench/compare_llm.py runs transformers on the same ids.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/common.h"
#include "bench/english.h"
#include "memory.h"
#include "model_args.h"
#include "models/llama/llama.h"
#include "output.h"
#include "qkv/blas.h"
#include "qkv/json.h"
#include "qkv/model.h"
#include "qkv/terminal.h"
#include "qkv/threads.h"

namespace qkv::cli {
namespace {

using bench::Settings;

constexpr uint64_t kPromptSeed = 20241124;
constexpr double kTolerance = 1e-4;  // max |Δ logit| over max |logit|, fused vs reference

// Exactly n ids of English-like sentences (bench/english.h), the same on every machine.
std::vector<int32_t> prompt_ids(const CausalLM& m, std::size_t n) {
  bench::SplitMix64 rng(kPromptSeed);
  std::string text;
  std::vector<int32_t> ids;
  while (ids.size() < n) {
    // A vocabulary without the byte symbols of English letters drops them (the characters it
    // spells are enough): the text would grow forever. Real tokenizers make a token of 2–8 bytes.
    if (text.size() > 64 * n)
      throw Error("--model " + m.path() + ": its tokenizer makes " + std::to_string(ids.size()) +
                      " tokens of " + std::to_string(text.size()) +
                      " bytes of English-like text; expected a vocabulary that covers the bytes "
                      "of English text (the bench needs " +
                      std::to_string(n) + " tokens)",
                  Error::Kind::invalid_argument);
    text += (text.empty() ? "" : " ") + bench::english_like_sentence(rng, 5 + rng.below(20));
    ids = m.tokenize(text, {.drop_unspelled = true});  // any ids do for a benchmark
  }
  ids.resize(n);
  return ids;
}

// Matrix FLOPs of the decoder, by the weights each token meets (2 per weight) and the attention
// of each query with the keys it sees (4·hidden per pair: q·k and p·v over all heads). Norms,
// RoPE, SiLU and softmax are left out (≲ 1%).
struct Flops {
  const LlamaConfig& c;
  double per_layer_weights() const {
    const double h = static_cast<double>(c.hidden),
                 kv = static_cast<double>(c.kv_heads * c.head_dim);
    return h * h * 2 + h * kv * 2 + h * static_cast<double>(c.ffn) * 3;
  }
  double all_weights() const {  // the layers' and the output matrix's
    return static_cast<double>(c.layers) * per_layer_weights() +
           static_cast<double>(c.vocab * c.hidden);
  }
  // n prompt tokens on an empty cache, logits of the last alone.
  double prompt(int64_t n) const {
    const double N = static_cast<double>(n), pairs = N * (N + 1) / 2;
    return static_cast<double>(c.layers) *
               (2 * N * per_layer_weights() + 4 * static_cast<double>(c.hidden) * pairs) +
           2 * static_cast<double>(c.vocab * c.hidden);
  }
  // One new token with `cached` positions before it.
  double step(int64_t cached) const {
    return 2 * all_weights() + static_cast<double>(c.layers) * 4 * static_cast<double>(c.hidden) *
                                   static_cast<double>(cached + 1);
  }
};

struct Validation {
  int64_t tokens = 0;
  // max |fast − reference| over every position's logits, divided by max |reference| — or, where
  // every reference logit is 0 (a model of zero weights), not divided: there is no scale to be
  // relative to, and 0/0 would be NaN.
  double max_error = 0;
  bool relative = true;
  bool same_next = false;
  std::string what() const {  // "of the largest" or "absolute (every logit is 0)"
    return relative ? "of the largest" : "absolute (every reference logit is 0)";
  }
};

// The logits of `ids` through the fused kernel against those through the float64 reference
// attention (the same float32 weights and projections): within kTolerance of the largest logit
// (absolutely where the largest is 0). And generate's first greedy token (prefill with the cache,
// last logits only) must be the argmax of the full pass's last row.
Validation validate(const CausalLM& m, const std::vector<int32_t>& ids) {
  const Tensor fast = m.logits(ids);
  std::vector<AttentionCapture> layers;
  const Tensor reference = m.capture(ids, layers);
  Validation v{.tokens = static_cast<int64_t>(ids.size())};
  const auto fail = [&](const std::string& detail) {
    throw Error("bench model: validation failed on a " + std::to_string(v.tokens) +
                    "-token prompt: " + detail + "; nothing was timed",
                Error::Kind::runtime);
  };
  double error = 0, scale = 0;
  for (int64_t i = 0; i < fast.numel(); ++i) {
    const double a = fast.data<float>()[i], b = reference.data<float>()[i];
    // A logit that is not a number has no error to measure: the model computes NaN or overflows.
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool fused = !std::isfinite(a);
      fail(std::string("a logit came out ") + (std::isnan(fused ? a : b) ? "NaN" : "±∞") +
           " on the " + (fused ? "fused" : "reference") +
           " path; the model computes non-finite numbers (its weights overflow float32 or are "
           "corrupt)");
    }
    error = std::max(error, std::abs(a - b));
    scale = std::max(scale, std::abs(b));
  }
  v.relative = scale > 0;
  v.max_error = v.relative ? error / scale : error;
  const int64_t vocab = m.config().vocab;
  const float* last = fast.data<float>() + (v.tokens - 1) * vocab;
  const auto argmax = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
  const std::vector<int32_t> next = m.generate(
      ids, {.max_tokens = 1, .stop_at_eos = false, .product = DecodeProduct::float32});
  v.same_next = next.size() == 1 && next[0] == argmax;
  if (!(v.max_error <= kTolerance) || !v.same_next) {
    char detail[240];
    std::snprintf(detail, sizeof detail,
                  "max |Δ logit| %.3g %s (expected ≤ %.0e); generate's first token %s the argmax "
                  "of the full pass",
                  v.max_error, v.what().c_str(), kTolerance, v.same_next ? "is" : "is NOT");
    fail(detail);
  }
  return v;
}

// int8's decode against float32's on the same prompt: the greedy tokens each generates, position
// by position, and — on float32's tokens, fed to both — the next-token logits step by step.
struct ProductCheck {
  int64_t same_tokens = 0, tokens = 0;   // free-running greedy tokens equal at their position
  int64_t same_argmax = 0, steps = 0;    // on float32's tokens: the same next token chosen
  double max_logit_diff = 0, largest_logit = 0;
};

struct Run {
  double prompt_seconds = 0;  // to the first generated token: the prompt's pass and one argmax
  double decode_seconds = 0;  // from the first generated token to the last
  std::vector<int32_t> generated;
};

// One generate call, timed at each token it streams.
Run run_once(const CausalLM& m, const std::vector<int32_t>& prompt, int64_t new_tokens,
             DecodeProduct product) {
  using Clock = std::chrono::steady_clock;
  Run r;
  const auto start = Clock::now();
  Clock::time_point first, last;
  r.generated = m.generate(prompt,
                           {.max_tokens = new_tokens + 1, .stop_at_eos = false, .product = product},
                           [&](int32_t) {
                             last = Clock::now();
                             if (first == Clock::time_point{}) first = last;
                           });
  r.prompt_seconds = std::chrono::duration<double>(first - start).count();
  r.decode_seconds = std::chrono::duration<double>(last - first).count();
  return r;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

struct Row {
  std::string name;
  int64_t tokens = 0;
  int runs = 0;
  double seconds = 0, flops = 0, sgemm = 0, cpu_share = 0;
  double weight_bytes = 0;  // read per token (decode only)
  double tokens_per_s() const { return static_cast<double>(tokens) / seconds; }
  double gflops() const { return flops / seconds / 1e9; }
};

std::string model_name(const CausalLM& m) {
  std::string name = std::filesystem::path(m.path()).stem().string();
  return printable(name);
}

const std::vector<int> kWidths = {12, 7, 8, 9, 8, 7, 7, 7};
std::string line(const std::vector<std::string>& cells) { return table_row(cells, kWidths); }

std::string fixed(double x, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, x);
  return b;
}

void print_header(const CausalLM& m, const Settings& s, const Validation& v,
                  DecodeProduct product) {
  const LlamaConfig& c = m.config();
  std::cout << "qkv bench model: " << model_name(m) << " (" << c.layers << " layers, hidden "
            << c.hidden << ", " << c.heads << " query heads sharing " << c.kv_heads
            << " key/value heads), "
            << (m.weight_format() == WeightFormat::file
                    ? "weights as the file's blocks: " + m.matrix_types() + "; decode " +
                          (product == DecodeProduct::int8 ? "int8" : "float32")
                    : std::string("weights dequantized to float32"))
            << ", " << s.threads << " thread"
            << (s.threads == 1 ? "" : "s")
            << (s.quick ? " (--quick: a smoke test, not a measurement)" : "") << "\n";
  char b[320];
  std::snprintf(b, sizeof b,
                "validated first: a %lld-token prompt's logits on the fused kernel within %.1e %s"
                "\nfrom the float64 reference attention (≤ %.0e); generate's first "
                "token is the full pass's argmax\n\n",
                static_cast<long long>(v.tokens), v.max_error, v.what().c_str(), kTolerance);
  std::cout << b
            << line({"case", "tokens", "median", "tokens/s", "GFLOP/s", "sgemm", "%sgemm",
                     "weights"})
            << "\n"
            << line({"", "", "ms", "", "", "GF/s", "", "GB/s"}) << "\n";
}

void print_row(const Row& r) {
  using namespace bench;
  std::cout << line({r.name, std::to_string(r.tokens), fixed(r.seconds * 1e3, 0),
                     rate_str(r.tokens_per_s()), rate_str(r.gflops()), rate_str(r.sgemm),
                     percent_str(r.gflops() / r.sgemm),
                     r.weight_bytes > 0 ? fixed(r.weight_bytes * r.tokens_per_s() / 1e9, 1) : "—"})
            << "\n";
  flush_stdout();
}

void print_notes(const Row& prompt, const Row& decode, const CausalLM& m,
                 const std::optional<ProductCheck>& check, int64_t rss) {
  const double mb = decode.weight_bytes / 1e6;
  auto runs = [](int n) { return std::to_string(n) + (n == 1 ? " run" : " runs"); };
  std::cout << "\n"
            << prompt.name << ": " << prompt.tokens
            << " tokens of English-like text in one pass (causal), to the first\n"
            << "  generated token (the last position's logits alone), median of "
            << runs(prompt.runs) << " after a warm-up.\n"
            << decode.name << ": " << decode.tokens << " tokens generated after it, greedy, one "
            << "pass a token with the KV cache;\n  median of " << runs(decode.runs)
            << ". Each token reads every weight once (" << fixed(mb, 0) << " MB "
            << (m.weight_format() == WeightFormat::file ? "as the file's blocks" : "in float32")
            << "): weights GB/s\n"
            << "  is that over the time a token takes, so generation is bound by memory, not "
               "FLOPs.\n"
            << "GFLOP/s: 2 per weight a token meets, 4·hidden per (query, key) pair it attends.\n"
            << "sgemm: OpenBLAS SGEMM 2048³ (512³ with --quick) on the same threads, measured "
               "just before.\n"
            << "memory: " << fixed(static_cast<double>(rss) / (1 << 20), 0)
            << " MiB resident after the runs (the weights " << fixed(static_cast<double>(m.weight_bytes()) / (1 << 20), 0)
            << " MiB, the KV cache, the buffers).\n";
  if (check) {
    char b[400];
    std::snprintf(b, sizeof b,
                  "int8 against float32 decode (--decode float32), same prompt: %lld of %lld "
                  "greedy tokens the same;\n  on float32's tokens, %lld of %lld next tokens the "
                  "same, logits within %.3g (the largest |logit| %.3g).\n",
                  static_cast<long long>(check->same_tokens), static_cast<long long>(check->tokens),
                  static_cast<long long>(check->same_argmax), static_cast<long long>(check->steps),
                  check->max_logit_diff, check->largest_logit);
    std::cout << b;
  }
  std::cout << "Side by side with llama.cpp and transformers: bench/compare_llm.py "
               "(bench/README.md).\n";
}

nlohmann::json to_json(const Row& r, const Settings& s, const Validation& v) {
  nlohmann::json j = timing_json(r, s);
  j.update({{"tokens", r.tokens},
            {"validated_tokens", v.tokens},
            {"max_error", number_json(v.max_error)},
            {"max_error_relative", v.relative}});
  if (r.weight_bytes > 0)
    j["weights_gb_per_s"] = number_json(r.weight_bytes * r.tokens_per_s() / 1e9);
  return j;
}

// The decoder, opened, its bench sized against its context and --memory-limit, then loaded: the
// header is read first, so that a model too large is refused having read a few MB of it.
CausalLM open_for_bench(const BenchModelArgs& args, int64_t prompt_tokens, int64_t new_tokens) {
  // The header: the weights are read once sized.
  CausalLM m = open_causal_lm(args.model.dir, weight_format(args.model.weights));
  if (prompt_tokens + new_tokens > m.config().context)
    throw Error("--model " + args.model.dir + ": the model reads at most " +
                    std::to_string(m.config().context) + " positions; the bench needs " +
                    std::to_string(prompt_tokens + new_tokens) + " (prompt-" +
                    std::to_string(prompt_tokens) + ", then decode-" + std::to_string(new_tokens) +
                    ")",
                Error::Kind::invalid_argument);
  // The check captures 64 tokens; the runs keep the prompt's and the new tokens' KV cache.
  require_memory(std::max(m.capture_bytes(64), m.generate_bytes(prompt_tokens + new_tokens + 1)),
                 args.memory_limit,
                 "qkv bench model: " + args.model.dir + " (its weights, a captured pass and " +
                     "the KV cache)",
                 "a smaller model");
  load_weights(m, args.model.dir);
  return m;
}

// s.repeats timed runs of the prompt and the new tokens: the medians into the rows, the share of
// the cores they got, and the last run's tokens.
void time_runs(const CausalLM& m, const std::vector<int32_t>& prompt, int64_t new_tokens,
               DecodeProduct product, const Settings& s, Progress& progress, Row& p, Row& d,
               std::vector<int32_t>& generated) {
  std::vector<double> prompt_times, decode_times;
  const double cpu0 = bench::cpu_seconds();
  const double wall = bench::seconds_of([&] {
    for (int i = 0; i < s.repeats; ++i) {
      progress.show("bench model: run " + std::to_string(i + 1) + " of " +
                    std::to_string(s.repeats) + ": " + std::to_string(prompt.size()) +
                    " prompt tokens, " + std::to_string(new_tokens) + " generated");
      Run r = run_once(m, prompt, new_tokens, product);
      prompt_times.push_back(r.prompt_seconds);
      decode_times.push_back(r.decode_seconds);
      generated = std::move(r.generated);
    }
  });
  p.seconds = median(prompt_times), d.seconds = median(decode_times);
  p.cpu_share = d.cpu_share = (bench::cpu_seconds() - cpu0) / (wall * s.threads);
}

ProductCheck check_products(const CausalLM& m, const std::vector<int32_t>& prompt,
                            const std::vector<int32_t>& int8_tokens) {
  ProductCheck c;
  const GenerateOptions exact{.max_tokens = static_cast<int64_t>(int8_tokens.size()),
                              .stop_at_eos = false,
                              .product = DecodeProduct::float32};
  const std::vector<int32_t> float32_tokens = m.generate(prompt, exact);
  c.tokens = static_cast<int64_t>(int8_tokens.size());
  for (std::size_t i = 0; i < int8_tokens.size() && i < float32_tokens.size(); ++i)
    c.same_tokens += int8_tokens[i] == float32_tokens[i] ? 1 : 0;
  const std::vector<int32_t> fed(float32_tokens.begin(), float32_tokens.end() - 1);
  const Tensor a = m.step_logits(prompt, fed, DecodeProduct::int8);
  const Tensor b = m.step_logits(prompt, fed, DecodeProduct::float32);
  const int64_t vocab = a.dim(1);
  c.steps = a.dim(0);
  for (int64_t i = 0; i < c.steps; ++i) {
    const float* x = a.data<float>() + i * vocab;
    const float* y = b.data<float>() + i * vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      c.max_logit_diff = std::max(c.max_logit_diff, std::abs(double{x[v]} - y[v]));
      c.largest_logit = std::max(c.largest_logit, std::abs(double{y[v]}));
    }
    c.same_argmax += std::max_element(x, x + vocab) - x == std::max_element(y, y + vocab) - y;
  }
  return c;
}

// The process's resident bytes now (VmRSS), 0 where /proc does not say.
int64_t resident_now() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

}  // namespace

int run_bench_causal_lm(const BenchModelArgs& args) {
  if (!args.corpus.empty() || !args.dump_corpus.empty())
    throw Error("qkv bench model: --corpus and --dump-corpus are for sentence encoders; " +
                args.model.dir + " is a decoder (its prompt is generated)");
  const Settings s = bench::resolve(args.common);
  qkv::set_num_threads(s.threads);
  set_blas_threads(s.threads);
  const int64_t prompt_tokens = s.quick ? 128 : 512, new_tokens = s.quick ? 32 : 128;
  const int64_t sgemm_n = s.quick ? 512 : 2048;

  Progress progress;
  progress.show("bench model: loading " + args.model.dir);
  CausalLM m = open_for_bench(args, prompt_tokens, new_tokens);
  const std::vector<int32_t> prompt = prompt_ids(m, static_cast<std::size_t>(prompt_tokens));
  progress.show("bench model: checking against the float64 reference attention");
  const Validation v = validate(m, {prompt.begin(), prompt.begin() + 64});

  if (!s.json) {
    progress.clear();
    print_header(m, s, v, decode_product(args.decode));
  }
  const Flops flops{m.config()};
  Row p{.name = "prompt-" + std::to_string(prompt_tokens),
        .tokens = prompt_tokens,
        .runs = s.repeats,
        .flops = flops.prompt(prompt_tokens)};
  Row d{.name = "decode-" + std::to_string(new_tokens),
        .tokens = new_tokens,
        .runs = s.repeats,
        .weight_bytes = m.weight_format() == WeightFormat::file
                            ? static_cast<double>(m.weight_bytes())
                            : flops.all_weights() * 4};
  for (int64_t t = 0; t < new_tokens; ++t) d.flops += flops.step(prompt_tokens + t);
  p.sgemm = d.sgemm = bench::sgemm_gflops(sgemm_n, s.threads, 3);

  const DecodeProduct product = decode_product(args.decode);
  progress.show("bench model: warming up");
  (void)run_once(m, prompt, 4, product);
  std::vector<int32_t> generated;
  time_runs(m, prompt, new_tokens, product, s, progress, p, d, generated);
  const int64_t rss = resident_now();
  // int8 against float32 where the two differ: matrices kept as blocks, decoded in int8.
  std::optional<ProductCheck> check;
  if (product == DecodeProduct::int8 && m.weight_format() == WeightFormat::file) {
    progress.show("bench model: int8's decode against float32's on the same prompt");
    check = check_products(m, prompt, generated);
  }
  progress.clear();
  if (s.json) {
    nlohmann::json jp = to_json(p, s, v), jd = to_json(d, s, v);
    for (nlohmann::json* j : {&jp, &jd})
      j->update({{"weights", args.model.weights},
                 {"matrix_types", m.matrix_types()},
                 {"decode", args.decode},
                 {"weight_bytes", m.weight_bytes()},
                 {"rss_bytes", rss}});
    jp["prompt_ids"] = prompt;
    jd["generated_ids"] = std::vector<int32_t>(generated.begin() + 1, generated.end());
    jd["first_id"] = generated.front();  // the prompt's own next token, timed with it
    if (check)
      jd["int8_vs_float32"] = {{"same_greedy_tokens", check->same_tokens},
                               {"tokens", check->tokens},
                               {"same_argmax_on_float32_tokens", check->same_argmax},
                               {"steps", check->steps},
                               {"max_logit_diff", number_json(check->max_logit_diff)},
                               {"largest_logit", number_json(check->largest_logit)}};
    std::cout << jp.dump() << "\n" << jd.dump() << "\n";
  } else {
    print_row(p);
    print_row(d);
    print_notes(p, d, m, check, rss);
  }
  if (p.cpu_share < 0.8)
    std::cerr << "qkv: warning: bench model: the runs got " << bench::percent_str(p.cpu_share)
              << " of " << s.threads
              << " cores: other work on the machine, or threads waiting on each other\n";
  return 0;
}

}  // namespace qkv::cli
