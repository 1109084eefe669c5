// The retrieval view of Q·K: `qkv embed`, `qkv similarity`, `qkv search` (one file each).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model_args.h"

namespace qkv::cli {

struct EmbedArgs {
  ModelArgs model;
  std::vector<std::string> texts;
  std::string npy;
  bool json = false;
  int batch_size = 32;
  std::string precision = "fp32";  // --precision fp32 | bf16
  bool compare_fp32 = false;       // --compare-fp32: bf16's cosine distance to fp32, on stderr
  std::string memory_limit;        // --memory-limit SIZE; empty: half the machine's memory
};
CLI::App* add_embed_command(CLI::App& app, EmbedArgs& args);
int run_embed(const EmbedArgs& args);

struct SimilarityArgs {
  ModelArgs model;
  std::string a, b;
  bool json = false;
};
CLI::App* add_similarity_command(CLI::App& app, SimilarityArgs& args);
int run_similarity(const SimilarityArgs& args);

struct SearchArgs {
  ModelArgs model;
  std::string query, corpus;
  int top = 10;
  double temperature = 0.05;
  bool json = false;
  std::string memory_limit;  // --memory-limit SIZE; empty: half the machine's memory
};
CLI::App* add_search_command(CLI::App& app, SearchArgs& args);
int run_search(const SearchArgs& args);

}  // namespace qkv::cli
