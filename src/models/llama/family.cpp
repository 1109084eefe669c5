// The decoder LLMs' entry in the model registry (qkv/model.h): a GGUF file of an architecture
// qkv runs (supported_gguf_architectures), or the installed SmolLM2-135M-Instruct ("smollm2").
#include "core/gguf.h"
#include "models/families.h"

namespace qkv {

ModelFamily llama_family() {
  return {
      .kind = ModelKind::causal_lm,
      .name = "llama",
      .description =
          "a decoder-only LLM from a GGUF file: llama (Llama 2/3, TinyLlama, Mistral, SmolLM), "
          "qwen2, qwen3, gemma3; SmolLM2-135M built in",
      .names = {"smollm2", "SmolLM2-135M-Instruct"},
      // The magic bytes decide before the name: an Ollama blob is a GGUF file named by its hash.
      .claims = [](const std::string& path) { return is_gguf_file(path) || named(path, ".gguf"); },
      .open =
          [](const std::string& path, const OpenOptions& options) {
            const bool builtin = is_builtin_model(path);
            auto model = std::make_shared<CausalLM>(CausalLM::open(builtin ? "smollm2" : path));
            if (options.load_weights) model->load_weights();
            const LlamaConfig& c = model->config();
            ModelInfo info{.kind = ModelKind::causal_lm,
                           .family = c.architecture,
                           .name = builtin ? "SmolLM2-135M-Instruct" : display_name(path),
                           .path = model->path(),
                           .layers = c.layers,
                           .heads = c.heads,
                           .kv_heads = c.kv_heads,
                           .d_model = c.hidden,
                           .vocab = c.vocab,
                           .capabilities = {Capability::generate}};
            return Model(std::move(info), std::move(model));
          },
  };
}

}  // namespace qkv
