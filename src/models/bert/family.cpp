// The sentence encoder's entry in the model registry (qkv/model.h): a BERT-family directory, or
// the installed all-MiniLM-L6-v2 ("" or "minilm").
#include "models/families.h"

namespace qkv {

ModelFamily bert_family() {
  return {
      .kind = ModelKind::sentence_encoder,
      .name = "bert",
      .description =
          "a BERT-family sentence encoder: a directory with config.json, "
          "model.safetensors and vocab.txt (all-MiniLM-L6-v2)",
      .names = {"", "minilm"},
      .claims = [](const std::string&) { return true; },  // the rest: taken for a directory
      .open =
          [](const std::string& path, const OpenOptions& options) {
            const bool builtin = path.empty() || path == "minilm";
            auto model = std::make_shared<SentenceModel>(
                SentenceModel::load(builtin ? default_model_dir() : path, options.sentence));
            const BertConfig& c = model->config();
            ModelInfo info{.kind = ModelKind::sentence_encoder,
                           .family = "bert",
                           .name = builtin ? "all-MiniLM-L6-v2" : display_name(path),
                           .path = model->dir(),
                           .layers = c.num_layers,
                           .heads = c.num_heads,
                           .kv_heads = c.num_heads,
                           .d_model = c.hidden_size,
                           .vocab = c.vocab_size,
                           .capabilities = {Capability::encode}};
            return Model(std::move(info), std::move(model));
          },
  };
}

}  // namespace qkv
