// python/src/arrays.h — arrays in and out of qkv without copies: a qkv::Tensor that views a NumPy
// array's own memory, and a NumPy array that views a Tensor's and keeps it alive.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "qkv/tensor.h"

namespace qkv::python {

namespace nb = nanobind;

// Any array on the CPU that offers the buffer protocol or DLPack (NumPy's, PyTorch's), read only.
using Array = nb::ndarray<nb::ro, nb::device::cpu>;

// A Tensor viewing a's memory (float32, float64 or bool; rank ≤ 4; strides ≥ 0 and whole
// elements; _array in python/qkv/_attention.py makes any other layout so, by a copy). The array
// stays alive while any view of it does. Errors name the argument: "q: int64 array; expected float32 ...".
Tensor tensor_of(const Array& a, const std::string& name);

// A NumPy array viewing t's memory (None for an undefined tensor); the array keeps t alive.
nb::object array_of(const Tensor& t);

}  // namespace qkv::python
