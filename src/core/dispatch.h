// core/dispatch.h — a tensor's runtime float dtype turned into a compile-time element type.
//
// Code that works on float32 and float64 alike is a template over the element type T;
// dispatch_float picks T from the dtype once, instead of a hand-written
// `if (x.dtype() == DType::f32) f(x.data<float>()); else f(x.data<double>());` at every call:
//
//   dispatch_float(x.dtype(), [&]<class T>(T) { kernel(y.data<T>(), x.data<T>(), n); });
//
// f is called with float{} for float32 and double{} for float64 (only the type matters), and what
// it returns, dispatch_float returns. Any other dtype (bool) is a qkv::Error that names it.
#pragma once

#include <string>
#include <utility>

#include "qkv/tensor.h"

namespace qkv {

template <class F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return std::forward<F>(f)(float{});
    case DType::f64:
      return std::forward<F>(f)(double{});
    case DType::b8:
      break;
  }
  throw Error("dispatch_float: dtype " + std::string(dtype_name(dtype)) +
              "; expected float32 or float64");
}

}  // namespace qkv
