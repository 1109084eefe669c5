// `qkv bench`: benchmarks on this machine, one target a subcommand — `qkv bench attention` (the
// kernels, on N(0, 1) data), `qkv bench model` (all-MiniLM-L6-v2 or SmolLM2 end to end, on text),
// `qkv bench perceiver` (latent queries' cross-attention against self-attention) and
// `qkv bench ring` (ring attention over MPI). Each target validates before it times, warms up,
// takes the median of several runs, and reports GFLOP/s beside this machine's SGEMM rate measured
// in the same run (docs/CONVENTIONS.md §4.2).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model_args.h"

namespace qkv::cli {

// Options every target takes.
struct BenchCommon {
  bool json = false;   // one JSON object per line instead of a table
  int threads = 0;     // 0: $QKV_NUM_THREADS, else the machine's cores
  int repeats = 0;     // timed runs after the warm-up; 0: 3, or 1 with --quick
  bool quick = false;  // smaller shapes and one timed run: a smoke test, not a measurement
};

struct BenchAttentionArgs {
  BenchCommon common;  // threads: unused; --threads is thread_counts
  // --threads N,N,...: each case at each count, in increasing order (duplicates dropped); one
  // count is today's single run; empty: $QKV_NUM_THREADS, else the machine's cores.
  std::vector<int> thread_counts;
  std::vector<std::string> cases;  // names; empty: the default set
  bool list = false;               // --list: print the cases (shapes, FLOPs) and run nothing
  std::string precision = "fp32";  // --precision: fp32 or bf16 (the fused kernels' opt-in)
  std::string device = "cpu";      // --device cpu or cuda (the GPU kernels, Path::cuda; issue 32)
};

struct BenchModelArgs {
  BenchCommon common;        // repeats: the throughput's timed runs
  ModelArgs model;           // --model DIR
  std::string corpus;        // --corpus FILE: the throughput's texts, one a line; empty: generated
  std::string dump_corpus;   // --dump-corpus FILE: write the throughput's texts there
  std::string memory_limit;  // --memory-limit SIZE; empty: half the machine's memory
  std::string decode = "int8";     // --decode: a decoder's new tokens on blocks, int8 or float32
  std::string precision = "fp32";  // --precision: a sentence encoder's fp32 or bf16 (opt-in)
};

struct BenchPerceiverArgs {
  BenchCommon common;
  int64_t latents = 32;  // N
};

struct BenchRingArgs {
  BenchCommon common;              // threads: per rank (default 1: the ranks are the parallelism)
  int64_t length = 0;              // --length N: tokens in the whole sequence; 0: 4096 (512 quick)
  bool causal_contiguous = false;  // --causal-contiguous: also causal without zig-zag balancing
  std::string memory_limit;        // --memory-limit SIZE, for the ranks on one machine together
};

struct BenchArgs {
  BenchAttentionArgs attention;
  BenchModelArgs model;
  BenchPerceiverArgs perceiver;
  BenchRingArgs ring;
  CLI::App* ring_command = nullptr;       // set by add_bench_command
  CLI::App* bench_command = nullptr;      // set by add_bench_command
  CLI::App* attention_command = nullptr;  // set by add_bench_command
  CLI::App* model_command = nullptr;      // set by add_bench_command
  CLI::App* perceiver_command = nullptr;  // set by add_bench_command
};

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

// The targets (cli/bench/<target>.cpp; causal_lm.cpp for bench model --model smollm2).
int run_bench_attention(const BenchAttentionArgs& args);
int run_bench_model(const BenchModelArgs& args);      // a sentence encoder, or…
int run_bench_causal_lm(const BenchModelArgs& args);  // …a decoder (--model smollm2 or a .gguf)
int run_bench_perceiver(const BenchPerceiverArgs& args);
int run_bench_ring(const BenchRingArgs& args);  // ring attention, under mpirun

}  // namespace qkv::cli
