// models/llama/matrix.h: a decoder's matrix read, multiplied and dequantized, as float32 or as
// the file's blocks.
#include "models/llama/matrix.h"

#include "core/ggml_quants.h"
#include "nn/finite.h"
#include "qkv/memory.h"

namespace qkv {
namespace {

bool as_blocks(uint32_t type, WeightFormat format) {
  return format == WeightFormat::file && type != static_cast<uint32_t>(GgmlType::f32);
}

}  // namespace

Tensor read_llama_tensor(const GgufFile& f, const std::string& name, const Shape& shape) {
  if (f.info(name).shape != shape)
    throw Error(f.name() + ": tensor \"" + name + "\" is " + shape_str(f.info(name).shape) +
                    "; expected " + shape_str(shape) + " for this config",
                Error::Kind::runtime);
  Tensor t = f.tensor(name);
  require_finite_tensor(f.name(), name, t);
  return t;
}

LlamaMatrix read_llama_matrix(const GgufFile& f, const std::string& name, int64_t out, int64_t in,
                              bool bias, WeightFormat format, bool packed) {
  const std::string w = name + ".weight";
  LlamaMatrix m;
  const GgufTensorInfo& info = f.info(w);
  if (as_blocks(info.type, format)) {
    if (info.shape != Shape{out, in})
      throw Error(f.name() + ": tensor \"" + w + "\" is " + shape_str(info.shape) + "; expected " +
                      shape_str({out, in}) + " for this config",
                  Error::Kind::runtime);
    m.blocks = {.type = info.type,
                .out = out,
                .in = in,
                .row_bytes = ggml_bytes(info.type, static_cast<uint64_t>(in)),
                .data = f.blocks(w)};
    if (bias) m.bias = read_llama_tensor(f, name + ".bias", {out});
    return m;
  }
  m.dense = {.weight = read_llama_tensor(f, w, {out, in}),
             .bias = bias ? read_llama_tensor(f, name + ".bias", {out}) : Tensor()};
  if (packed) nn::pack(m.dense);
  return m;
}

Tensor llama_matmul(const Tensor& x, const LlamaMatrix& m, cpu::QuantProduct product) {
  if (!m.quantized()) return nn::linear(x, m.dense);
  const Tensor c = x.contiguous();
  const int64_t in = m.blocks.in, rows = c.numel() / in;
  Shape shape = c.shape();
  shape.back() = m.blocks.out;
  Tensor y(shape, DType::f32);
  cpu::quant_linear(y.data<float>(), m.blocks.out, c.data<float>(), in, rows, m.blocks,
                    m.bias.defined() ? m.bias.data<float>() : nullptr,
                    rows <= kInt8Rows ? product : cpu::QuantProduct::float32);
  return y;
}

std::vector<Tensor> llama_matmuls(const Tensor& x, const std::vector<const LlamaMatrix*>& ms,
                                  cpu::QuantProduct product) {
  const int64_t rows = x.numel() / x.dim(-1);
  bool together = product == cpu::QuantProduct::int8 && rows <= kInt8Rows;
  for (const LlamaMatrix* m : ms) together = together && m->quantized();
  std::vector<Tensor> ys;
  if (!together) {
    for (const LlamaMatrix* m : ms) ys.push_back(llama_matmul(x, *m, product));
    return ys;
  }
  const Tensor c = x.contiguous();
  std::vector<cpu::QuantOutput> outs;
  for (const LlamaMatrix* m : ms) {
    Shape shape = c.shape();
    shape.back() = m->blocks.out;
    ys.emplace_back(shape, DType::f32);
    outs.push_back({.w = &m->blocks,
                    .bias = m->bias.defined() ? m->bias.data<float>() : nullptr,
                    .y = ys.back().data<float>(),
                    .ldy = m->blocks.out});
  }
  cpu::quant_linears(c.data<float>(), c.dim(-1), rows, outs, product);
  return ys;
}

void llama_matrix_row(const LlamaMatrix& m, int64_t o, float* out) {
  if (m.quantized()) {
    dequantize(m.blocks.type, m.blocks.row(o), out, m.blocks.in);
    return;
  }
  std::copy_n(m.dense.weight.data<float>() + o * m.dense.in(), m.dense.in(), out);
}

Tensor llama_dense(const LlamaMatrix& m) {
  if (!m.quantized()) return m.dense.weight;
  Tensor w({m.blocks.out, m.blocks.in}, DType::f32);
  for (int64_t o = 0; o < m.blocks.out; ++o)
    dequantize(m.blocks.type, m.blocks.row(o), w.data<float>() + o * m.blocks.in, m.blocks.in);
  return w;
}

int64_t llama_matrix_bytes(uint32_t type, int64_t out, int64_t in, bool bias, WeightFormat format,
                           bool packed) {
  const double b = bias ? 4.0 * static_cast<double>(out) : 0.0;
  if (as_blocks(type, format))
    return saturated_bytes(static_cast<double>(ggml_bytes(type, static_cast<uint64_t>(in))) *
                               static_cast<double>(out) + b);
  return saturated_bytes((packed ? static_cast<double>(nn::packed_resident_bytes(out, in))
                                 : 4.0 * static_cast<double>(out * in)) + b);
}

}  // namespace qkv
