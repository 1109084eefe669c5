// The fused float32 path of qkv::attention: when it applies, and how the API's tensors become a
// cpu::FlashProblem (strided views, no copies where the last dimension is contiguous).
#pragma once

#include <string>

#include "attention/validate.h"

namespace qkv::attention_detail {

// Empty when the fused kernel can run this problem; otherwise why not (for Path::fused errors).
std::string fused_unsupported(const Tensor& q, const Tensor& k, const Tensor& v,
                              const AttentionOptions& options);

// Path::automatic → fused or reference; Path::fused where it does not apply → qkv::Error.
Path choose_path(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);

AttentionResult fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const AttentionOptions& options, const Dims& dims);
// With `forward` (its out, saved_max and saved_sum checked for shape), the forward pass is not run
// again; null runs it.
AttentionGrads fused_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const AttentionOptions& options,
                                        const Dims& dims, const AttentionResult* forward = nullptr);

}  // namespace qkv::attention_detail
