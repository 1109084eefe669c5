// qkv/npy.h — NumPy .npy files: read and write tensors.
//
// Reads format versions 1.0, 2.0 and 3.0 with dtype '<f4' (float32), '<f8' (float64) or '|b1'
// (bool), C order, rank 1 to 4. Anything else — Fortran order, big-endian, another dtype, a
// truncated or corrupt header, too few or too many data bytes — is a qkv::Error naming the file and
// what was found. Spec: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once

#include <string>
#include <string_view>

#include "qkv/tensor.h"

namespace qkv {

// Reads a .npy file. `path` appears in every error message.
Tensor read_npy(const std::string& path);
// Parses the bytes of a .npy file; `name` (a path or a label) appears in every error message.
Tensor parse_npy(std::string_view bytes, std::string_view name);

// The bytes of a .npy file holding `tensor` (any strides; written in C order). Version 1.0 unless
// the header needs 2.0.
std::string encode_npy(const Tensor& tensor);
// Writes a .npy file atomically: to a temporary name beside `path`, then renamed over it.
// Throws qkv::Error (Kind::runtime) when the file cannot be written.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace qkv
