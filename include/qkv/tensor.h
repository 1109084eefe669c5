// qkv/tensor.h — tensors: a shared buffer seen through a strided view, rank ≤ 4.
//
// A Tensor owns (shares) its storage; views made by transpose() or reshape() share it too, so a
// [B, L, H, D] projection output can be read as [B, H, L, D] without a copy. Elements are fp32,
// fp64 or bool; strides count elements, not bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace qkv {

// Every error qkv reports. The message names the argument, the value or shape found and what was
// expected. kind() tells a caller whether the input was wrong (a usage error) or the work failed.
// A NUL byte in the message (quoted from a file's metadata) is kept as the four characters \x00:
// what() is a C string, and the message ended there, mid-quote (issue 26).
class Error : public std::runtime_error {
 public:
  enum class Kind { invalid_argument, runtime };
  explicit Error(const std::string& message, Kind kind = Kind::invalid_argument)
      : std::runtime_error(without_nul(message)), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  static std::string without_nul(std::string s) {
    for (std::size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 4))
      s.replace(at, 1, "\\x00");
    return s;
  }
  Kind kind_;
};

enum class DType { f32, f64, b8 };

std::string_view dtype_name(DType dtype);  // "float32", "float64", "bool"
std::size_t dtype_size(DType dtype);       // 4, 8, 1

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "[2, 3, 4]"
// An integer with thousands separators, for messages: 1234567 → "1,234,567".
std::string grouped(int64_t n);

inline constexpr int kMaxRank = 4;

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage, defined() is false
  // A contiguous, zero-filled tensor.
  explicit Tensor(Shape shape, DType dtype = DType::f32);
  // A contiguous tensor holding `values` in row-major order (values.size() must equal numel).
  static Tensor from(Shape shape, const std::vector<float>& values);
  static Tensor from(Shape shape, const std::vector<double>& values);
  static Tensor from(Shape shape, std::initializer_list<float> values) {
    return from(std::move(shape), std::vector<float>(values));
  }
  static Tensor from(Shape shape, std::initializer_list<double> values) {
    return from(std::move(shape), std::vector<double>(values));
  }
  static Tensor full(Shape shape, double value, DType dtype = DType::f32);
  // A view of memory someone else owns — a NumPy array's, say — without a copy. `strides` count
  // elements (≥ 0, one per dimension); `data` must be aligned to the element. `owner` is kept as
  // long as any tensor viewing the memory lives, and released after the last.
  static Tensor borrow(void* data, Shape shape, Shape strides, DType dtype,
                       std::shared_ptr<void> owner);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim(int i) const;  // i < 0 counts from the end
  int64_t numel() const;
  bool is_contiguous() const;

  // Pointer to element [0, ..., 0]. T must match dtype() (bool for b8); throws otherwise.
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  // Element access through the strides; one index per dimension.
  template <class T, class... I>
  T& at(I... index) {
    return data<T>()[offset_of({static_cast<int64_t>(index)...})];
  }
  template <class T, class... I>
  const T& at(I... index) const {
    return data<T>()[offset_of({static_cast<int64_t>(index)...})];
  }
  // Any element as a double (bool as 0 or 1), by its row-major position 0 <= i < numel().
  double value(int64_t i) const;

  Tensor reshape(Shape shape) const;     // a view when contiguous, else a contiguous copy
  Tensor transpose(int a, int b) const;  // a strided view with dimensions a and b swapped
  // A view of `length` entries of dimension `dim` starting at `start` (PyTorch's narrow).
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor contiguous() const;     // *this if already contiguous, else a copy
  Tensor to(DType dtype) const;  // a contiguous converted copy (bool → 0/1, x → x != 0)
  Tensor clone() const;          // a contiguous deep copy

 private:
  int64_t offset_of(std::initializer_list<int64_t> index) const;
  void* raw() const;

  std::shared_ptr<std::byte[]> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
};

template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bool>,
                "qkv tensors hold float, double or bool");
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else
    return DType::b8;
}

[[noreturn]] void throw_dtype_mismatch(DType held, DType asked);

template <class T>
T* Tensor::data() {
  if (dtype_ != dtype_of<T>()) throw_dtype_mismatch(dtype_, dtype_of<T>());
  return static_cast<T*>(raw()) + offset_;
}

template <class T>
const T* Tensor::data() const {
  if (dtype_ != dtype_of<T>()) throw_dtype_mismatch(dtype_, dtype_of<T>());
  return static_cast<const T*>(raw()) + offset_;
}

}  // namespace qkv
