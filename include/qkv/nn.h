// qkv/nn.h — trainable transformer layers: explicit forward/backward pairs (llm.c style).
//
// Every layer's forward saves what its backward needs (one forward, then at most one backward);
// backward takes ∂loss/∂output, accumulates (+=) into its parameters' gradients and returns
// ∂loss/∂input. Layers run in the dtype they were built with: float32 for training (the fast
// kernels), float64 for the finite-difference gradient checks (the reference kernels).
// Tensors are [B, L, D] (batch, sequence, features) unless a comment says otherwise.
//
//   qkv/nn_modules.h     parameters, the random stream, Module; linear, embedding, positions,
//                        layer norm, dropout, the feed-forward block
//   qkv/nn_attention.h   multi-head and additive attention; encoder and decoder blocks
//   qkv/nn_recurrent.h   GRU cell, GRU, bidirectional GRU
//   qkv/nn_training.h    cross-entropy, gradient clipping, AdamW, parameter files
#pragma once

#include "qkv/nn_attention.h"
#include "qkv/nn_modules.h"
#include "qkv/nn_recurrent.h"
#include "qkv/nn_training.h"
