// Tensors: shared storage, strided views, conversions.
#include "qkv/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

namespace qkv {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::b8:
      return "bool";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::b8:
      return 1;
  }
  return 0;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream s;
  s << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << ']';
  return s.str();
}

void throw_dtype_mismatch(DType held, DType asked) {
  throw Error("tensor holds " + std::string(dtype_name(held)) + " but was read as " +
              std::string(dtype_name(asked)));
}

namespace {

Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t step = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

int64_t checked_numel(const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    throw Error("tensor shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) +
                "; expected rank ≤ " + std::to_string(kMaxRank));
  // Bound the product of the non-zero dimensions too, so that strides cannot overflow when a
  // zero-size dimension makes the element count 0.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1, extent = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("tensor shape " + shape_str(shape) + " has a negative dimension");
    if (d != 0 && extent > kMaxElements / d)
      throw Error("tensor shape " + shape_str(shape) +
                  (std::find(shape.begin(), shape.end(), 0) != shape.end()
                       ? " has no elements, but its other dimensions multiply past 2^40"
                       : " is too large: over 2^40 elements") +
                  "; expected at most 2^40 (" + std::to_string(kMaxElements) +
                  ") elements, counting a dimension of 0 as 1");
    if (d != 0) extent *= d;
    n *= d;
  }
  return n;
}

// Calls f(offset, i) for every element in row-major order: offset into storage through the
// strides, i the row-major position.
template <class F>
void for_each_offset(const Shape& shape, const Shape& strides, F&& f) {
  const int64_t n = checked_numel(shape);
  if (n == 0) return;
  const int rank = static_cast<int>(shape.size());
  int64_t index[kMaxRank] = {0, 0, 0, 0};
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(offset, i);
    for (int d = rank - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d]) break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, bool>)
    return x != From(0);
  else
    return static_cast<To>(x);
}

}  // namespace

Tensor::Tensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  const int64_t n = checked_numel(shape_);
  const std::size_t bytes = std::max<std::size_t>(1, n * dtype_size(dtype));
  storage_ = std::shared_ptr<std::byte[]>(new std::byte[bytes]());
  strides_ = row_major_strides(shape_);
}

Tensor Tensor::borrow(void* data, Shape shape, Shape strides, DType dtype,
                      std::shared_ptr<void> owner) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank) || strides.size() != shape.size())
    throw Error("Tensor::borrow: shape " + shape_str(shape) + " with " +
                std::to_string(strides.size()) + " strides; expected rank ≤ 4, a stride each");
  (void)checked_numel(shape);
  for (int64_t s : strides)
    if (s < 0) throw Error("Tensor::borrow: strides " + shape_str(strides) + "; expected ≥ 0");
  if (data == nullptr || reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) != 0)
    throw Error("Tensor::borrow: the data pointer is null or not aligned to its " +
                std::string(dtype_name(dtype)) + " elements");
  Tensor t;
  t.storage_ = std::shared_ptr<std::byte[]>(std::move(owner), static_cast<std::byte*>(data));
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.dtype_ = dtype;
  return t;
}

namespace {

template <class T>
Tensor tensor_from(Shape shape, const std::vector<T>& values) {
  Tensor t(std::move(shape), dtype_of<T>());
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw Error("Tensor::from: " + std::to_string(values.size()) + " values for shape " +
                shape_str(t.shape()) + "; expected " + std::to_string(t.numel()));
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

}  // namespace

Tensor Tensor::from(Shape shape, const std::vector<float>& values) {
  return tensor_from(std::move(shape), values);
}

Tensor Tensor::from(Shape shape, const std::vector<double>& values) {
  return tensor_from(std::move(shape), values);
}

Tensor Tensor::full(Shape shape, double value, DType dtype) {
  Tensor t(std::move(shape), dtype);
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::f32:
      std::fill_n(t.data<float>(), n, static_cast<float>(value));
      break;
    case DType::f64:
      std::fill_n(t.data<double>(), n, value);
      break;
    case DType::b8:
      std::fill_n(t.data<bool>(), n, value != 0);
      break;
  }
  return t;
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  const int j = i < 0 ? i + r : i;
  if (j < 0 || j >= r)
    throw Error("dimension " + std::to_string(i) + " is out of range for a tensor of shape " +
                shape_str(shape_));
  return shape_[j];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

bool Tensor::is_contiguous() const { return numel() == 0 || strides_ == row_major_strides(shape_); }

void* Tensor::raw() const {
  if (!storage_) throw Error("tensor is undefined (no storage)");
  return storage_.get();
}

int64_t Tensor::offset_of(std::initializer_list<int64_t> index) const {
  if (static_cast<int>(index.size()) != rank())
    throw Error("tensor of shape " + shape_str(shape_) + " indexed with " +
                std::to_string(index.size()) + " indices");
  int64_t offset = 0;
  int d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape_[d])
      throw Error("index " + std::to_string(i) + " out of range for dimension " +
                  std::to_string(d) + " of shape " + shape_str(shape_));
    offset += i * strides_[d++];
  }
  return offset;
}

double Tensor::value(int64_t i) const {
  // Unravel the row-major position into an offset through the strides.
  int64_t offset = 0;
  for (int d = rank() - 1; d >= 0; --d) {
    offset += (i % shape_[d]) * strides_[d];
    i /= shape_[d];
  }
  switch (dtype_) {
    case DType::f32:
      return data<float>()[offset];
    case DType::f64:
      return data<double>()[offset];
    case DType::b8:
      return data<bool>()[offset] ? 1.0 : 0.0;
  }
  return 0;
}

Tensor Tensor::reshape(Shape shape) const {
  const Shape wanted = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != numel() || shape.size() > static_cast<std::size_t>(kMaxRank))
    throw Error("cannot reshape a tensor of shape " + shape_str(shape_) + " to " +
                shape_str(wanted));
  Tensor t = contiguous();
  if (t.storage_ == storage_) {
    Tensor view = *this;
    view.shape_ = std::move(shape);
    view.strides_ = row_major_strides(view.shape_);
    return view;
  }
  t.shape_ = std::move(shape);
  t.strides_ = row_major_strides(t.shape_);
  return t;
}

Tensor Tensor::transpose(int a, int b) const {
  const int r = rank();
  if (a < 0) a += r;
  if (b < 0) b += r;
  if (a < 0 || a >= r || b < 0 || b >= r)
    throw Error("transpose(" + std::to_string(a) + ", " + std::to_string(b) +
                ") is out of range for a tensor of shape " + shape_str(shape_));
  Tensor view = *this;
  std::swap(view.shape_[a], view.shape_[b]);
  std::swap(view.strides_[a], view.strides_[b]);
  return view;
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
  const int r = rank();
  if (dim < 0) dim += r;
  if (dim < 0 || dim >= r)
    throw Error("narrow(" + std::to_string(dim) + ", ...) is out of range for a tensor of shape " +
                shape_str(shape_));
  if (start < 0 || length < 0 || start > shape_[dim] - length)
    throw Error("narrow(" + std::to_string(dim) + ", " + std::to_string(start) + ", " +
                std::to_string(length) + ") does not fit dimension " + std::to_string(dim) +
                " of shape " + shape_str(shape_));
  Tensor view = *this;
  view.shape_[dim] = length;
  if (length > 0) view.offset_ += start * strides_[dim];
  return view;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const { return to(dtype_); }

Tensor Tensor::to(DType dtype) const {
  if (!defined()) return Tensor();
  Tensor out(shape_, dtype);
  auto copy = [&](auto* dst, const auto* src) {
    using To = std::remove_pointer_t<decltype(dst)>;
    for_each_offset(shape_, strides_,
                    [&](int64_t offset, int64_t i) { dst[i] = convert<To>(src[offset]); });
  };
  auto from = [&](auto* dst) {
    switch (dtype_) {
      case DType::f32:
        copy(dst, data<float>());
        break;
      case DType::f64:
        copy(dst, data<double>());
        break;
      case DType::b8:
        copy(dst, data<bool>());
        break;
    }
  };
  switch (dtype) {
    case DType::f32:
      from(out.data<float>());
      break;
    case DType::f64:
      from(out.data<double>());
      break;
    case DType::b8:
      from(out.data<bool>());
      break;
  }
  return out;
}

}  // namespace qkv
