// The trained encoder-decoders' entry in the model registry (qkv/model.h): a .safetensors file
// `qkv train` saved (transformer or RNNsearch; a Perceiver's file is claimed before this).
#include "models/families.h"

namespace qkv {

ModelFamily seq2seq_family() {
  return {
      .kind = ModelKind::seq2seq,
      .name = "seq2seq",
      .description =
          "an encoder-decoder qkv train made (transformer or RNNsearch): a "
          ".safetensors file",
      .names = {},
      // By its name alone: whether it really is one is the loader's to say, naming what is wrong.
      .claims = [](const std::string& path) { return named(path, ".safetensors"); },
      .open =
          [](const std::string& path, const OpenOptions&) {
            std::map<std::string, std::string> metadata;
            std::shared_ptr<Seq2Seq> model = Seq2Seq::load(path, &metadata);
            const Seq2SeqConfig& c = model->config();
            ModelInfo info{.kind = ModelKind::seq2seq,
                           .family = std::string(to_string(c.architecture)),
                           .name = display_name(path),
                           .path = path,
                           .layers = c.layers,
                           .heads = c.heads,
                           .kv_heads = c.attention.kv_heads > 0 ? c.attention.kv_heads : c.heads,
                           .d_model = c.d_model,
                           .vocab = model->vocab().size(),
                           .capabilities = {Capability::translate, Capability::train}};
            return Model(std::move(info), std::move(model), std::move(metadata));
          },
  };
}

}  // namespace qkv
