// `qkv bench`: parses the targets' options and runs the one named.
#include "bench/bench.h"

#include <algorithm>
#include <string>
#include <vector>

#include "memory.h"
#include "options.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv::cli {
namespace {

constexpr const char* kBenchFooter =
    "Each target validates its kernels against the float64 reference, then times them: a warm-up,\n"
    "then the median of several runs (attention: N(0, 1) data; model: English-like text),\n"
    "reported in GFLOP/s and as a share of this machine's OpenBLAS SGEMM rate, measured just\n"
    "before each case (the machine may be shared, and its load change within a run).\n\n"
    "Examples:\n"
    "  qkv bench attention                  every default case, as a table\n"
    "  qkv bench attention --quick          small shapes, one run: a smoke test\n"
    "  qkv bench attention --case 4k,decode --json\n"
    "  qkv bench attention --case long      L = S = 65536, one head, forward only\n"
    "  qkv bench model                      all-MiniLM-L6-v2: latency and sentences/s\n"
    "  qkv bench model --model smollm2      SmolLM2-135M: prompt and generated tokens/s\n"
    "  qkv bench model --quick --json       a smoke test\n"
    "  qkv bench perceiver                  N×L cross-attention against L×L self-attention\n"
    "  mpirun -np 4 qkv bench ring          ring attention over MPI on 4 processes\n";

constexpr const char* kRingFooter =
    "Run under mpirun: each process is one rank of the ring (src/distributed; README, \"Attention\n"
    "beyond one machine\"). Hq = 8, Hkv = 2, D = 64, B = 1, N tokens split evenly; cases full\n"
    "(contiguous blocks) and causal (zig-zag blocks: every rank the same share of the triangle).\n"
    "Rank 0 first runs the single-process fused kernel on the whole sequence: the baseline time,\n"
    "and the result the ring's out, dq, dk, dv must match (max |difference| ≤ 1e-4, else exit 1).\n"
    "Columns: the ring's forward and backward (the slowest rank, median), the single process's,\n"
    "efficiency = single / (P × ring), MiB each rank sent, the share of time blocked on "
    "messages.\n\n"
    "Examples:\n"
    "  mpirun -np 2 qkv bench ring\n"
    "  mpirun -np 4 --oversubscribe qkv bench ring --length 8192 --json\n"
    "  qkv bench ring --quick               one rank: the baseline against itself\n"
    "As root, OpenMPI needs mpirun --allow-run-as-root.\n";

constexpr const char* kAttentionFooter =
    "Cases (B = 1; --quick divides L and S by 16):\n"
    "  1k, 1k-causal       Hq = 8, D = 64, L = S = 1024\n"
    "  4k, 4k-causal       Hq = 8, D = 64, L = S = 4096\n"
    "  16k, 16k-causal     Hq = 8, D = 64, L = S = 16384\n"
    "  4k-d128             Hq = 4, D = 128, L = S = 4096\n"
    "  4k-gqa              Hq = 8, Hkv = 2, D = 64, L = S = 4096\n"
    "  decode              Hq = 32, Hkv = 8, D = 128, L = 1, S = 8192\n"
    "  long                Hq = 1, D = 64, L = S = 65536, forward only (not in the default set)\n\n"
    "Columns: fused forward and backward GFLOP/s (forward FLOPs 4·B·Hq·L·S·D, half when causal;\n"
    "backward 2.5× forward; the backward is timed alone, given the forward's output and row\n"
    "statistics); OpenBLAS SGEMM 2048³ on min(threads, cores) OpenBLAS threads, measured just\n"
    "before the case, and their share of it (below the table: its threads in force, those seen\n"
    "working, its CPU share);\n"
    "the float64 reference path's forward (one head; skipped above L·S = 4096²); the unfused "
    "OpenBLAS\n"
    "math path (S = Q·Kᵀ, softmax, P·V) forward and backward, and the fused kernel's speed-up\n"
    "over it; the peak scratch memory in MiB beyond inputs and outputs.\n\n"
    "Examples:\n"
    "  qkv bench attention\n"
    "  qkv bench attention --quick --json\n"
    "  qkv bench attention --case 4k --threads 1 --repeats 5\n"
    "  qkv bench attention --threads 1,2,4,8,16 --case 4k,4k-gqa\n"
    "  qkv bench attention --case 4k,4k-gqa --precision bf16\n"
    "                                       a sweep: each case at each count, GFLOP/s per thread\n"
    "                                       and the speed-up over the smallest count\n"
    "  qkv bench attention --list --json    the cases, their shapes and FLOPs\n"
    "  qkv bench attention --device cuda --case 4k,16k --precision bf16\n"
    "                                       on the GPU: fp32 (CUDA cores) or bf16 (tensor cores),\n"
    "                                       TFLOP/s forward and backward, median of 20 runs\n";

constexpr const char* kModelFooter =
    "First a check: a few texts' embeddings (both latency sentences, the 128-token one\n"
    "not with --quick, and 3 of the corpus) must be unit length and within 1e-5 of the\n"
    "float64 reference run of the same weights. Then, text in, unit-length embedding out\n"
    "(tokenizing, the encoder, mean pooling), on --threads threads:\n"
    "  latency-12     one sentence of 12 tokens ([CLS] and [SEP] included), batch 1,\n"
    "                 median of 20 runs after a warm-up (3 with --quick)\n"
    "  latency-128    the same with a sentence of 128 tokens\n"
    "  throughput     1,000 generated English-like sentences of 5 to 40 words (fixed\n"
    "                 seed; 64 with --quick), or --corpus FILE, at batch 32, sorted by\n"
    "                 length as sentence-transformers does: sentences/s, tokens/s\n"
    "GFLOP/s counts the encoder's matrix products per sequence of n tokens (padding\n"
    "excluded), per layer n·2·(4·H² + 2·H·I) + 4·n²·H, over the whole time. The SGEMM\n"
    "rate (OpenBLAS 2048³, 512³ with --quick) is measured just before each case.\n"
    "bench/compare_torch.py model runs sentence-transformers on the same texts.\n\n"
    "With --model smollm2 (or any GGUF decoder qkv runs: llama, qwen2, qwen3, gemma3), a\n"
    "decoder instead, as llama.cpp's llama-bench measures one: the fused attention's logits\n"
    "are first checked against the float64 reference attention on a 64-token prompt, then\n"
    "  prompt-512     512 tokens of English-like text in one pass: prompt tokens/s\n"
    "  decode-128     128 tokens generated after it, greedy, with the KV cache: tokens/s,\n"
    "                 and the GB/s of weights read (each token reads them all once)\n"
    "(128 and 32 with --quick). bench/compare_llm.py runs transformers on the same ids.\n\n"
    "Examples:\n"
    "  qkv bench model\n"
    "  qkv bench model --threads 2 --json\n"
    "  qkv bench model --dump-corpus corpus.txt   the generated corpus, one a line\n"
    "  qkv bench model --corpus my_sentences.txt --repeats 5\n"
    "  qkv bench model --model smollm2 --threads 2\n";

// --threads N or N,N,...: each count checked as every --threads is (thread_count()), the message
// naming the item and the list; sorted, duplicates dropped. Split here, not by CLI11's delimiter,
// for --case's reason (below).
void add_thread_counts_option(CLI::App* cmd, std::vector<int>& counts) {
  cmd->add_option_function<std::string>(
         "--threads",
         [&counts](const std::string& value) {
           const std::string expected = "; expected N or N,N,... e.g. 1,2,4,8,16";
           std::vector<std::string> items;
           std::size_t begin = 0;
           for (std::size_t end; begin <= value.size(); begin = end + 1) {
             end = std::min(value.find(',', begin), value.size());
             items.push_back(value.substr(begin, end - begin));
           }
           const CLI::Validator check = thread_count();
           for (std::string item : items) {
             if (item.empty())
               throw CLI::ValidationError("--threads",
                                          "'" + value + "' has an empty item" + expected);
             const std::string problem = check(item);
             if (!problem.empty())
               throw CLI::ValidationError(
                   "--threads",
                   items.size() == 1 ? problem : "'" + item + "' in '" + value + "': " + problem);
             counts.push_back(std::stoi(item));
           }
           std::sort(counts.begin(), counts.end());
           counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
         },
         thread_count_help() +
             "; a list N,N,... runs every case at each count (a sweep: per-thread rates and "
             "speed-ups)")
      ->type_name("N[,N...]")
      ->allow_extra_args(false);
}

void add_common_options(
    CLI::App* cmd, BenchCommon& c,
    const char* repeats_help = "timed runs after the warm-up; the median is reported",
    std::vector<int>* thread_counts = nullptr) {
  cmd->add_flag("--json", c.json, "one JSON object per case per line instead of a table");
  if (thread_counts)
    add_thread_counts_option(cmd, *thread_counts);
  else
    cmd->add_option("--threads", c.threads, thread_count_help())
        ->type_name("N")
        ->transform(thread_count());
  cmd->add_option("--repeats", c.repeats, std::string(repeats_help) + ", 1 to 1000")
      ->type_name("R")
      ->transform(integer({.lo = 1, .hi = 1000}));
  cmd->add_flag("--quick", c.quick, "small shapes and one timed run: a smoke test");
}

}  // namespace

namespace {

// qkv bench attention: the kernels against SGEMM, the unfused path and the reference.
void add_attention_target(CLI::App* bench, BenchArgs& a) {
  CLI::App* attention = bench->add_subcommand(
      "attention",
      "fused attention forward and backward against SGEMM, the unfused math path "
      "and the reference");
  attention->footer(kAttentionFooter);
  attention->allow_extras(false);  // a subcommand inherits allow_extras from bench
  add_common_options(attention, a.attention.common,
                     "timed runs after the warm-up; the median is reported",
                     &a.attention.thread_counts);
  // Split here, not by CLI11's delimiter: a value ending in ',' made CLI11 take the next argument
  // as more of it (`--case , --json` ran no case and lost --json, issue 26).
  attention
      ->add_option_function<std::vector<std::string>>(
          "--case",
          [&cases = a.attention.cases](const std::vector<std::string>& values) {
            for (const std::string& value : values) {
              std::size_t begin = 0;
              for (std::size_t end; begin <= value.size(); begin = end + 1) {
                end = std::min(value.find(',', begin), value.size());
                if (end == begin)
                  throw CLI::ValidationError("--case", "'" + value +
                                                           "' has an empty name; expected NAME,... "
                                                           "e.g. 4k,decode");
                cases.push_back(value.substr(begin, end - begin));
              }
            }
          },
          "cases to run, e.g. 4k,decode (see below)")
      ->type_name("NAME,...")
      ->allow_extra_args(false);
  attention
      ->add_option("--precision", a.attention.precision,
                   "fp32 (default) or bf16: the fused kernels with bf16 inputs to their products "
                   "and float32 sums, checked by docs/CONVENTIONS.md §1.1b; the error against "
                   "float64 of the unrounded inputs is reported (the unfused baseline is fp32 "
                   "and is left out)")
      ->check(one_of({"fp32", "bf16"}))
      ->type_name("fp32|bf16");
  attention
      ->add_option("--device", a.attention.device,
                   "cpu (default) or cuda: the GPU kernels on q, k, v and dout in GPU memory "
                   "(the same N(0, 1) data), validated against the float64 reference first; "
                   "TFLOP/s; exits 1 with the reason where there is no GPU")
      ->check(one_of({"cpu", "cuda"}))
      ->type_name("cpu|cuda");
  attention->add_flag("--list", a.attention.list,
                      "list the cases (shape, causal, mask, FLOPs) and run nothing; with --json, "
                      "one object a case");
  a.attention_command = attention;
}

// qkv bench model: a model end to end.
void add_model_target(CLI::App* bench, BenchArgs& a) {
  CLI::App* model = bench->add_subcommand(
      "model",
      "a model end to end: all-MiniLM-L6-v2's latency and sentences/s at batch 32, or "
      "a decoder's prompt and generated tokens/s (--model smollm2 or a GGUF file)");
  model->footer(kModelFooter);
  model->allow_extras(false);
  add_common_options(model, a.model.common,
                     "timed runs of the throughput corpus (a decoder: of prompt and generation) "
                     "after a warm-up (default 3, 1 with --quick); the median is reported");
  model
      ->add_option("--corpus", a.model.corpus,
                   "the throughput's sentences, one a line (default: 1,000 generated ones)")
      ->type_name("FILE");
  model
      ->add_option("--dump-corpus", a.model.dump_corpus,
                   "write the throughput's sentences to FILE, one a line (for "
                   "bench/compare_torch.py)")
      ->type_name("FILE");
  add_model_option(*model, a.model.model, {.decoder = true});
  add_decode_option(*model, a.model.decode);
  model
      ->add_option("--precision", a.model.precision,
                   "a sentence encoder's arithmetic: fp32 (default) or bf16 (its dense layers and "
                   "attention on bf16 inputs, float32 sums; validated by cosine distance to the "
                   "float64 reference, at most 1e-2)")
      ->check(one_of({"fp32", "bf16"}))
      ->type_name("fp32|bf16");
  add_memory_limit_option(*model, a.model.memory_limit, "the model and the corpus's embeddings");
  a.model_command = model;
}

// qkv bench perceiver: latent queries' cost.
void add_perceiver_target(CLI::App* bench, BenchArgs& a) {
  CLI::App* perceiver = bench->add_subcommand(
      "perceiver",
      "latent queries' cost: N×L cross-attention against L×L self-attention, L = 1k to 16k");
  perceiver->allow_extras(false);
  add_common_options(perceiver, a.perceiver.common);
  perceiver
      ->add_option("--latents", a.perceiver.latents, "latent queries N, 1 to 4096 (default 32)")
      ->type_name("N")
      ->transform(integer({.lo = 1, .hi = 4096}));
  perceiver->footer(
      "\nExamples:\n  qkv bench perceiver\n  qkv bench perceiver --latents 64 --json\n");
  a.perceiver_command = perceiver;
}

// qkv bench ring: ring attention over MPI.
void add_ring_target(CLI::App* bench, BenchArgs& a) {
  CLI::App* ring = bench->add_subcommand(
      "ring", "ring attention over MPI (mpirun -np P): time, bytes per rank, scaling efficiency");
  ring->footer(kRingFooter);
  ring->allow_extras(false);
  add_common_options(ring, a.ring.common);
  ring->get_option("--threads")
      ->description("kernel threads per rank, at most " + std::to_string(kThreadsPerCore) +
                    " × the cores (default 1)");
  ring->add_option("--length", a.ring.length,
                   "tokens in the whole sequence, 1 to 16777216 (2^24; default 4096)")
      ->type_name("N")
      ->transform(integer({.lo = 1, .hi = uint64_t{1} << 24}));
  ring->add_flag("--causal-contiguous", a.ring.causal_contiguous,
                 "also the causal case with contiguous blocks (no load balancing)");
  add_memory_limit_option(*ring, a.ring.memory_limit,
                          "the ranks on this machine together (each holds the whole problem)");
  a.ring_command = ring;
}

}  // namespace

// The targets, as the errors name them (add_bench_command adds each).
constexpr const char* kTargets = "attention, model, perceiver or ring";

CLI::App* add_bench_command(CLI::App& app, BenchArgs& a) {
  CLI::App* bench =
      app.add_subcommand("bench", "benchmarks: GFLOP/s, share of this machine's GEMM, memory");
  bench->footer(kBenchFooter);
  // A missing or unknown target is reported by run_bench, naming the targets there are.
  bench->require_subcommand(0, 1);
  bench->allow_extras();
  add_attention_target(bench, a);
  add_model_target(bench, a);
  add_perceiver_target(bench, a);
  add_ring_target(bench, a);
  a.bench_command = bench;
  return bench;
}

int run_bench(const BenchArgs& a) {
  // bench allows extras so that it can name a wrong target itself (its targets do not).
  std::vector<std::string> extra;
  if (a.bench_command) extra = a.bench_command->remaining();
  const bool attention = a.attention_command && a.attention_command->parsed();
  const bool model = a.model_command && a.model_command->parsed();
  const bool perceiver = a.perceiver_command && a.perceiver_command->parsed();
  const bool ring = a.ring_command && a.ring_command->parsed();
  if (!extra.empty() && (attention || model || perceiver || ring))
    throw Error("qkv bench: '" + extra.front() +
                "' is not an option of qkv bench; options go after the target, e.g. qkv bench "
                "attention --json");
  if (!extra.empty())
    throw Error("qkv bench: '" + extra.front() + "' is not a target; expected " +
                std::string(kTargets) + " (see qkv bench --help)");
  if (attention) return run_bench_attention(a.attention);
  if (model) return run_bench_model(a.model);
  if (perceiver) return run_bench_perceiver(a.perceiver);
  if (ring) return run_bench_ring(a.ring);
  throw Error("qkv bench: expected a target: " + std::string(kTargets) +
              ", e.g. qkv bench attention --quick");
}

}  // namespace qkv::cli
