// The Perceiver's entry in the model registry (qkv/model.h): a .safetensors file Perceiver::save
// wrote (its metadata's "format" says so).
#include "models/families.h"

namespace qkv {

bool is_perceiver_file(const std::string& path);  // perceiver.cpp

ModelFamily perceiver_family() {
  return {
      .kind = ModelKind::perceiver,
      .name = "perceiver",
      .description = "a Perceiver qkv train made for the count task: a .safetensors file",
      .names = {},
      .claims = is_perceiver_file,
      .open =
          [](const std::string& path, const OpenOptions&) {
            std::map<std::string, std::string> metadata;
            std::shared_ptr<Perceiver> model = Perceiver::load(path, &metadata);
            const PerceiverConfig& c = model->config();
            ModelInfo info{.kind = ModelKind::perceiver,
                           .family = "perceiver",
                           .name = display_name(path),
                           .path = path,
                           .layers = 1 + c.blocks,
                           .heads = c.heads,
                           .kv_heads = c.heads,
                           .d_model = c.d_model,
                           .vocab = c.vocab,
                           .capabilities = {Capability::classify, Capability::train}};
            return Model(std::move(info), std::move(model), std::move(metadata));
          },
  };
}

}  // namespace qkv
