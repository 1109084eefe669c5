#include "arrays.h"

#include <cstddef>
#include <memory>
#include <string>

namespace qkv::python {
namespace {

DType dtype_of_array(const Array& a, const std::string& name) {
  const nb::dlpack::dtype t = a.dtype();
  if (t == nb::dtype<float>()) return DType::f32;
  if (t == nb::dtype<double>()) return DType::f64;
  if (t == nb::dtype<bool>()) return DType::b8;
  const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string kind = t.code < 7 ? kinds[t.code] : "unknown";
  throw Error(name + ": " + kind + std::to_string(t.bits) +
              " array; expected float32 or float64 (a mask may be bool)");
}

}  // namespace

Tensor tensor_of(const Array& a, const std::string& name) {
  const DType dtype = dtype_of_array(a, name);
  if (a.ndim() > static_cast<std::size_t>(kMaxRank))
    throw Error(name + ": " + std::to_string(a.ndim()) + " dimensions; expected at most " +
                std::to_string(kMaxRank));
  Shape shape, strides;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape.push_back(static_cast<int64_t>(a.shape(i)));
    strides.push_back(a.stride(i));  // nanobind counts strides in elements
  }
  // The view holds a reference to the array (nanobind's handle); whoever drops the last view
  // may not hold the GIL (the kernels run without it), so the release takes it.
  auto* held = new Array(a);
  std::shared_ptr<void> owner(held, [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<Array*>(p);
  });
  // A 0-element array may have no data pointer, or one that no element needs aligned; a view
  // of nothing points here, aligned for every dtype (a float was not enough for float64).
  alignas(std::max_align_t) static std::byte empty[sizeof(double)];
  void* data = a.size() == 0 ? static_cast<void*>(empty) : const_cast<void*>(a.data());
  try {
    return Tensor::borrow(data, shape, strides, dtype, std::move(owner));
  } catch (const Error& e) {
    throw Error(name + ": " + e.what());
  }
}

nb::object array_of(const Tensor& t) {
  if (!t.defined()) return nb::none();
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::size_t shape[kMaxRank];
  int64_t strides[kMaxRank];
  for (int i = 0; i < t.rank(); ++i) {
    shape[i] = static_cast<std::size_t>(t.dim(i));
    strides[i] = t.strides()[static_cast<std::size_t>(i)];
  }
  const auto rank = static_cast<std::size_t>(t.rank());
  switch (t.dtype()) {
    case DType::f32:
      return nb::cast(
          nb::ndarray<nb::numpy, float>(keep->data<float>(), rank, shape, owner, strides));
    case DType::f64:
      return nb::cast(
          nb::ndarray<nb::numpy, double>(keep->data<double>(), rank, shape, owner, strides));
    case DType::b8:
      return nb::cast(
          nb::ndarray<nb::numpy, bool>(keep->data<bool>(), rank, shape, owner, strides));
  }
  return nb::none();
}

}  // namespace qkv::python
