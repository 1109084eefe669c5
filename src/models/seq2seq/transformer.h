// The encoder–decoder transformer of `qkv train` (see qkv/model.h for its equations).
#pragma once

#include <memory>
#include <vector>

#include "qkv/model.h"

namespace qkv {

class TransformerSeq2Seq final : public Seq2Seq {
 public:
  TransformerSeq2Seq(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype);

  Tensor forward(const Batch& batch, bool training, nn::Rng& rng) override;
  void backward(const Tensor& dlogits) override;
  Seq2SeqCapture capture(const std::string& source) override;
  std::shared_ptr<const ResidualModel> residual(const std::string& source) override;  // residual.cpp
  void collect(std::vector<nn::Parameter*>& out) override;

 private:
  void decode_batch(Batch batch, int alignment_layer, Decoded& result) override;
  Tensor encode(const Batch& batch, bool training, nn::Rng& rng);
  Tensor decode(const Batch& batch, const Tensor& memory, bool training, nn::Rng& rng,
                int need_weights_layer = -1);

  DType dtype_;
  nn::Embedding embedding_;
  std::vector<std::unique_ptr<nn::EncoderBlock>> encoder_;
  std::vector<std::unique_ptr<nn::DecoderBlock>> decoder_;
  nn::LayerNorm encoder_norm_, decoder_norm_;
  nn::Linear output_;
  Tensor positions_;  // [max(max_source, max_target + 1), d_model]
  // Saved by forward for backward.
  int64_t batch_ = 0, source_length_ = 0, target_length_ = 0, embed_length_ = 0;
};

}  // namespace qkv
