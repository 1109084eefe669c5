#include "generate.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "memory.h"
#include "model_args.h"
#include "options.h"
#include "output.h"
#include "qkv/explain_generation.h"
#include "qkv/model.h"
#include "qkv/terminal.h"

namespace qkv::cli {
CLI::App* add_generate_command(CLI::App& app, GenerateArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "continue a text with a decoder LLM (SmolLM2-135M, or a GGUF file), token by token");
  cmd->add_option("prompt", args.prompt, "the text to continue")
      ->required()
      ->check(text("a text to continue, e.g. qkv generate \"The capital of France is\""));
  cmd->add_option("--model", args.model,
                  "a GGUF file of a llama, qwen2, qwen3 or gemma3 model (known by its first "
                  "bytes, whatever its name: an Ollama blob too), its name in Ollama "
                  "(llama3.2:1b), LM Studio or the Hugging Face cache (qkv models lists them), or "
                  "smollm2 (the default: SmolLM2-135M-Instruct, fetched by scripts/fetch_model "
                  "smollm2)")
      ->option_text("FILE|NAME");
  add_weights_option(*cmd, args.weights);
  add_decode_option(*cmd, args.decode);
  cmd->add_option("--max-tokens", args.max_tokens, "new tokens at most, 1 to 8192 (default 48)")
      ->transform(integer({.lo = 1, .hi = 8192}));
  cmd->add_option("--temperature", args.temperature,
                  "0: always the most likely token (default); > 0, at most 100: sample "
                  "softmax(logits / T)")
      ->check(finite_number({.lo = 0, .hi = 100}));
  cmd->add_option("--seed", args.seed, "of the sampling, 0 to 2^64 - 1 (default 1)")
      ->transform(seed_integer())
      ->option_text("S");
  CLI::Option* chat = cmd->add_flag(
      "--chat", args.chat,
      "frame the prompt as one user message of the model's chat template (the families ChatML, "
      "Llama 3, Gemma, Mistral, Llama 2 and Phi-3), after the template's default system message "
      "if it has one, and let the model answer as the assistant");
  cmd->add_option("--system", args.system,
                  "the system message, in place of the chat template's default "
                  "(SmolLM2's: \"You are a helpful AI assistant named SmolLM, trained by Hugging "
                  "Face\"); refused where the template has no place for one (Gemma 2's, "
                  "Mistral's of 2023, Phi-3-mini's of April 2024)")
      ->check(text("the system message's text (leave --system out for the chat template's "
                   "default)"))
      ->needs(chat);
  cmd->add_flag(
      "--explain", args.explain,
      "each token as it comes, with the heads that carried it (direct logit attribution: a "
      "head's output at the last position through W_O, the final norm and the token's "
      "unembedding row), where their last query looked, and the KV cache after the pass that "
      "chose it (K and V per layer and kv head, grouped-query sharing; Q never kept). The tokens "
      "are plain generation's. Cost: two extra passes over the whole prefix a token (O(n²) "
      "attention): fine for 64 tokens, slow for thousands");
  cmd->add_flag("--json", args.json,
                "with --explain: one JSON object on stdout at the end — {cache: {layers, heads, "
                "kv_heads, head_dim, group, bytes_per_position, sharing}, prompt_tokens, tokens, "
                "steps: [{step, id, text, positions, queries, cache_bytes, logit, log_prob, "
                "attribution, heads: [{layer, head, kv_head, attribution, looked}]}]}");
  add_memory_limit_option(*cmd, args.memory_limit, "the model and its KV cache");
  cmd->footer(
      "\nExamples:\n"
      "  qkv generate \"The capital of France is\"\n"
      "  qkv generate --chat \"What is attention in a transformer?\" --max-tokens 80\n"
      "  qkv generate --chat --system \"Answer in French.\" \"What is the capital of Italy?\"\n"
      "  qkv generate \"Once upon a time\" --temperature 0.8 --seed 7\n"
      "  qkv generate \"The capital of France is\" --explain --max-tokens 8\n");
  return cmd;
}

namespace {

// Generation stops at a token that ends the text (<|im_end|>, <|endoftext|>, ...), at
// --max-tokens, or when the prompt and the text fill the model's context; the last is not the
// user's choice, so it is said (on stderr: stdout stays the text). Exit 0: what was generated is
// a correct continuation, only a shorter one.
void note_context_stop(const GenerateArgs& args, const CausalLM& model, std::size_t prompt,
                       std::size_t out) {
  const int64_t context = model.context_length();
  const auto total = static_cast<int64_t>(prompt + out);
  if (static_cast<int64_t>(out) < args.max_tokens && total >= context)
    std::cerr << "qkv: note: stopped after " << out << " of " << args.max_tokens
              << " tokens: the prompt (" << prompt << " tokens) and the text generated fill "
              << "the model's context of " << context << " positions\n";
}

// --explain: each step as it comes (text), or one JSON object at the end.
int run_generate_explained(const GenerateArgs& args, const CausalLM& model,
                           const std::vector<int32_t>& prompt) {
  const explain::GenerationRequest request{.generate = {.max_tokens = args.max_tokens,
                                                        .temperature = args.temperature,
                                                        .seed = args.seed.value_or(1)}};
  Progress progress;
  const auto say = [&](int64_t done) {
    progress.show("explaining token " + grouped(done + 1) + " of at most " +
                  grouped(args.max_tokens) + " …");
  };
  say(0);
  const explain::ExplainedGeneration g = explain::explain_generation(
      model, prompt, request,
      [&](const explain::ExplainedGeneration& so_far, const explain::GenerationStep& step) {
        if (!args.json) {
          progress.clear();
          if (step.step == 0) std::cout << explain::generation_header_text(so_far);
          std::cout << explain::generation_step_text(so_far, step);
          flush_stdout();
        }
        say(step.step + 1);
      });
  progress.clear();
  if (args.json)
    std::cout << explain::generation_json(g).dump() << "\n";
  else
    std::cout << (g.steps.empty() ? explain::generation_header_text(g) : "")
              << explain::generation_footer_text(g);
  flush_stdout();
  note_context_stop(args, model, prompt.size(), g.steps.size());
  return 0;
}

}  // namespace

int run_generate(const GenerateArgs& args) {
  if (args.prompt.empty()) throw Error("the prompt is empty; expected a text to continue");
  if (args.json && !args.explain)
    throw Error("--json requires --explain; expected qkv generate --explain --json TEXT");
  if (args.system && args.system->empty())
    throw Error(
        "--system is empty; expected the system message's text (leave --system out for the chat "
        "template's default)");
  // Greedy decoding draws nothing: a seed the user gave would change nothing, and is said so.
  if (args.seed && args.temperature == 0)
    std::cerr << "qkv: note: --seed has no effect at --temperature 0 (greedy: each step takes the "
                 "likeliest token); give a --temperature above 0 to sample\n";
  Progress progress;
  progress.show("loading " + args.model + " …");
  // The header: the weights are read once sized.
  CausalLM model = open_causal_lm(args.model, weight_format(args.weights));
  const std::vector<int32_t> prompt = model.tokenize([&] {
    if (!args.chat) return args.prompt;
    try {
      return model.chat_prompt(args.prompt, args.system.value_or(""));
    } catch (const Error& e) {
      rethrow_for_causal_lm(args.model, e);  // a template of no family qkv writes, for --chat
    }
  }());
  // The KV cache grows with every position: bounded, and said, before the first token.
  // --explain also captures every layer's weights over the whole prefix (capture_bytes).
  const int64_t positions = static_cast<int64_t>(prompt.size()) + args.max_tokens;
  const int64_t captured = std::min(positions, model.context_length());
  require_memory(args.explain
                     ? std::max(model.generate_bytes(positions), model.capture_bytes(captured))
                     : model.generate_bytes(positions),
                 args.memory_limit,
                 "generating " + grouped(args.max_tokens) + " tokens after a prompt of " +
                     grouped(static_cast<int64_t>(prompt.size())) + " (the model and its KV cache)",
                 model.load_bytes() > memory_limit(args.memory_limit)
                     ? "a smaller model" + too_large(model.load_bytes(),
                                                    model.weight_format() == WeightFormat::float32)
                     : "a shorter prompt or --max-tokens");
  load_weights(model, args.model);
  progress.clear();
  if (args.explain) return run_generate_explained(args, model, prompt);
  // The prompt is shown once the first token is chosen: a model that computes NaN from it leaves
  // nothing on stdout but the error.
  bool started = false;
  const auto start = [&] {
    if (!started && !args.chat) std::cout << printable_lines(args.prompt);
    started = true;
  };
  std::string pending;
  const std::vector<int32_t> out =
      model.generate(prompt,
                     {.max_tokens = args.max_tokens,
                      .temperature = args.temperature,
                      .seed = args.seed.value_or(1),
                      .product = decode_product(args.decode)},
                     [&](int32_t id) {
                       start();
                       pending += model.generated_text(id);
                       const std::size_t cut = whole_characters(pending);
                       std::cout << printable_lines(pending.substr(0, cut));
                       flush_stdout();
                       pending.erase(0, cut);
                     });
  start();
  std::cout << printable_lines(pending) << "\n";
  flush_stdout();
  note_context_stop(args, model, prompt.size(), out.size());
  return 0;
}

}  // namespace qkv::cli
