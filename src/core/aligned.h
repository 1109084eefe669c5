// 64-byte aligned scratch buffers whose bytes are counted, so benchmarks can report the peak
// extra memory a kernel used (memory_peak_bytes) beyond its inputs and outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace qkv {

int64_t memory_current_bytes();    // scratch bytes live now
int64_t memory_peak_bytes();       // the most live at once since the last reset
void memory_reset_peak();          // peak := current
void memory_track(int64_t delta);  // called by AlignedBuffer

template <class T>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { resize(n); }
  ~AlignedBuffer() { release(); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Reallocates (uninitialized) when n differs from the current size.
  void resize(std::size_t n) {
    if (n == size_) return;
    release();
    if (n == 0) return;
    data_ = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignment)));
    size_ = n;
    memory_track(static_cast<int64_t>(n * sizeof(T)));
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void release() {
    if (!data_) return;
    ::operator delete(data_, std::align_val_t(kAlignment));
    memory_track(-static_cast<int64_t>(size_ * sizeof(T)));
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace qkv
