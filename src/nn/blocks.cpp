// Transformer blocks (Vaswani et al. 2017 §3.1): sublayers with residual connections, dropout
// and LayerNorm, forward and backward.
//
// Post-norm (the paper's): y = LayerNorm(x + Dropout(Sublayer(x))).
// Pre-norm (Xiong et al. 2020; GPT-2): y = x + Dropout(Sublayer(LayerNorm(x))); a stack of them
// needs a final LayerNorm, which the model owns.
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

// a + b as a new tensor: Dropout and the identity paths hand back their input itself, so nothing
// here is updated in place.
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor s = a.clone();
  const Tensor c = b.contiguous();
  if (s.shape() != c.shape() || s.dtype() != c.dtype())
    throw Error("block residual: " + shape_str(s.shape()) + " + " + shape_str(c.shape()) +
                "; expected one shape and dtype");
  dispatch_float(s.dtype(), [&]<class T>(T) {
    T* x = s.data<T>();
    const T* y = c.data<T>();
    for (int64_t i = 0; i < s.numel(); ++i) x[i] += y[i];
  });
  return s;
}

// The attention options with the block's width and heads; self-attention reads d_model-wide
// memory (its own input), cross-attention the encoder's (kdim; 0: d_model).
MultiHeadAttentionOptions attention_options(const BlockOptions& o, bool cross) {
  MultiHeadAttentionOptions a = o.attention;
  a.d_model = o.d_model;
  a.heads = o.heads;
  if (!cross) a.kdim = 0;
  return a;
}

}  // namespace

// ---- EncoderBlock ----

EncoderBlock::EncoderBlock(std::string name, const BlockOptions& options, Rng& rng, DType dtype)
    : attention(name + ".attention", attention_options(options, false), rng, dtype),
      ffn(name + ".ffn", options.d_model, options.ffn_hidden, options.activation, options.dropout,
          rng, dtype),
      norm1(name + ".norm1", options.d_model, 1e-5, dtype),
      norm2(name + ".norm2", options.d_model, 1e-5, dtype),
      options_(options),
      drop1_(options.dropout),
      drop2_(options.dropout) {}

Tensor EncoderBlock::forward(const Tensor& x, const std::vector<int64_t>& lengths, bool training,
                             Rng& rng, bool need_weights) {
  auto attend = [&](const Tensor& in) {
    return drop1_.forward(
        attention.forward(in, in, lengths, Causal::none, training, rng, need_weights), training,
        rng);
  };
  if (options_.norm == NormPosition::pre) {
    const Tensor h = add(x, attend(norm1.forward(x)));
    return add(h, drop2_.forward(ffn.forward(norm2.forward(h), training, rng), training, rng));
  }
  const Tensor h = norm1.forward(add(x, attend(x)));
  return norm2.forward(add(h, drop2_.forward(ffn.forward(h, training, rng), training, rng)));
}

Tensor EncoderBlock::backward(const Tensor& dy) {
  // Self-attention reads its input as both queries and memory: the two gradients add.
  auto attention_backward = [&](const Tensor& d) {
    const MultiHeadAttention::Grads g = attention.backward(drop1_.backward(d));
    return add(g.dx, g.dmemory);
  };
  if (options_.norm == NormPosition::pre) {
    // Forward was h = x + drop(attn(norm1(x))), y = h + drop(ffn(norm2(h))).
    const Tensor dh = add(dy, norm2.backward(ffn.backward(drop2_.backward(dy))));
    return add(dh, norm1.backward(attention_backward(dh)));
  }
  // Forward was h = norm1(x + drop(attn(x))), y = norm2(h + drop(ffn(h))).
  const Tensor ds2 = norm2.backward(dy);
  const Tensor ds1 = norm1.backward(add(ds2, ffn.backward(drop2_.backward(ds2))));
  return add(ds1, attention_backward(ds1));
}

void EncoderBlock::collect(std::vector<Parameter*>& out) {
  attention.collect(out);
  ffn.collect(out);
  norm1.collect(out);
  norm2.collect(out);
}

// ---- DecoderBlock ----

DecoderBlock::DecoderBlock(std::string name, const BlockOptions& options, Rng& rng, DType dtype)
    : self_attention(name + ".self_attention", attention_options(options, false), rng, dtype),
      cross_attention(name + ".cross_attention", attention_options(options, true), rng, dtype),
      ffn(name + ".ffn", options.d_model, options.ffn_hidden, options.activation, options.dropout,
          rng, dtype),
      norm1(name + ".norm1", options.d_model, 1e-5, dtype),
      norm2(name + ".norm2", options.d_model, 1e-5, dtype),
      norm3(name + ".norm3", options.d_model, 1e-5, dtype),
      options_(options),
      drop1_(options.dropout),
      drop2_(options.dropout),
      drop3_(options.dropout) {}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory,
                             const std::vector<int64_t>& lengths,
                             const std::vector<int64_t>& memory_lengths, bool training, Rng& rng,
                             bool need_weights) {
  // Query i sees its own prefix (top-left causal) within the target's length.
  auto attend_self = [&](const Tensor& in) {
    return drop1_.forward(
        self_attention.forward(in, in, lengths, Causal::top_left, training, rng, need_weights),
        training, rng);
  };
  auto attend_memory = [&](const Tensor& in) {
    return drop2_.forward(cross_attention.forward(in, memory, memory_lengths, Causal::none,
                                                  training, rng, need_weights),
                          training, rng);
  };
  auto feed_forward = [&](const Tensor& in) {
    return drop3_.forward(ffn.forward(in, training, rng), training, rng);
  };
  if (options_.norm == NormPosition::pre) {
    const Tensor h1 = add(x, attend_self(norm1.forward(x)));
    const Tensor h2 = add(h1, attend_memory(norm2.forward(h1)));
    return add(h2, feed_forward(norm3.forward(h2)));
  }
  const Tensor h1 = norm1.forward(add(x, attend_self(x)));
  const Tensor h2 = norm2.forward(add(h1, attend_memory(h1)));
  return norm3.forward(add(h2, feed_forward(h2)));
}

DecoderBlock::Grads DecoderBlock::backward(const Tensor& dy) {
  Grads grads;
  // The cross-attention's query gradient flows on; its memory gradient goes to the encoder.
  auto cross_backward = [&](const Tensor& d) {
    MultiHeadAttention::Grads g = cross_attention.backward(drop2_.backward(d));
    grads.dmemory = g.dmemory;
    return g.dx;
  };
  auto self_backward = [&](const Tensor& d) {
    const MultiHeadAttention::Grads g = self_attention.backward(drop1_.backward(d));
    return add(g.dx, g.dmemory);
  };
  auto ffn_backward = [&](const Tensor& d) { return ffn.backward(drop3_.backward(d)); };
  if (options_.norm == NormPosition::pre) {
    // Forward was h1 = x + drop(self(norm1(x))), h2 = h1 + drop(cross(norm2(h1), m)),
    // y = h2 + drop(ffn(norm3(h2))).
    const Tensor dh2 = add(dy, norm3.backward(ffn_backward(dy)));
    const Tensor dh1 = add(dh2, norm2.backward(cross_backward(dh2)));
    grads.dx = add(dh1, norm1.backward(self_backward(dh1)));
    return grads;
  }
  // Forward was h1 = norm1(x + drop(self(x))), h2 = norm2(h1 + drop(cross(h1, m))),
  // y = norm3(h2 + drop(ffn(h2))).
  const Tensor ds3 = norm3.backward(dy);
  const Tensor ds2 = norm2.backward(add(ds3, ffn_backward(ds3)));
  const Tensor ds1 = norm1.backward(add(ds2, cross_backward(ds2)));
  grads.dx = add(ds1, self_backward(ds1));
  return grads;
}

void DecoderBlock::collect(std::vector<Parameter*>& out) {
  self_attention.collect(out);
  cross_attention.collect(out);
  ffn.collect(out);
  norm1.collect(out);
  norm2.collect(out);
  norm3.collect(out);
}

}  // namespace qkv::nn
