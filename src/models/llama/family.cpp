// The decoder LLMs' entry in the model registry (qkv/model.h): a GGUF file of the Llama
// architecture, or the installed SmolLM2-135M-Instruct ("smollm2").
#include "core/gguf.h"
#include "models/families.h"

namespace qkv {

ModelFamily llama_family() {
  return {
      .kind = ModelKind::causal_lm,
      .name = "llama",
      .description = "a decoder-only LLM of the Llama architecture: a GGUF file (SmolLM2-135M)",
      .names = {"smollm2"},
      // The magic bytes decide before the name: an Ollama blob is a GGUF file named by its hash.
      .claims = [](const std::string& path) { return is_gguf_file(path) || named(path, ".gguf"); },
      .open =
          [](const std::string& path, const OpenOptions& options) {
            auto model = std::make_shared<CausalLM>(CausalLM::open(path));
            if (options.load_weights) model->load_weights();
            const LlamaConfig& c = model->config();
            ModelInfo info{.kind = ModelKind::causal_lm,
                           .family = "llama",
                           .name = path == "smollm2" ? "SmolLM2-135M-Instruct" : display_name(path),
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
