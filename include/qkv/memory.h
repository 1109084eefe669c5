// qkv/memory.h — how much memory a piece of work may take. Each model sizes its own work, from
// its configuration and the lengths it is given (qkv/model.h, qkv/train.h, qkv/perceiver.h); the
// command and the Python package compare that estimate with a limit — half the machine's memory
// (less under a cgroup limit or ulimit -v; default_memory_limit) unless the user sets one — before
// the work starts, and refuse past it with the size, instead of
// failing halfway with std::bad_alloc or the OOM killer.
//
// An estimate is the peak resident memory of the whole process doing that work: the model as it
// sits in memory, what the work allocates at its largest, and a fixed allowance for the program
// itself. It is meant to err high (tests compare it with the measured peak), never low by much.
#pragma once

#include <cstdint>
#include <string>

#include "qkv/tensor.h"

namespace qkv {

// The machine's physical memory in bytes; 0 when the system does not say.
int64_t physical_memory_bytes();
// The memory limit of this process's cgroup (a container's, systemd's MemoryMax), kMaxBytes if
// none.
int64_t cgroup_memory_bytes();
// The address space left under `ulimit -v` (RLIMIT_AS) beyond what is mapped now, kMaxBytes if
// unlimited.
int64_t address_space_room();
// The default limit: half the memory this process may use (the machine's, or its cgroup's where
// that is less; 4 GiB when neither says), and at most three quarters of the address space room
// `ulimit -v` leaves, so that a limited shell refuses the work with its size rather than ending in
// std::bad_alloc halfway.
int64_t default_memory_limit();
// " (ulimit -v limits the address space to 439 MiB)" where ulimit -v sets a bound, else "": for
// the message of an allocation that failed anyway.
std::string address_space_bound();
// What bounds the default below half the machine's memory, for a message ("3/4 of the 1.8 GiB of
// address space ulimit -v leaves", "half the cgroup's limit of 4.0 GiB"); "" when nothing does.
std::string default_memory_limit_bound();
// What is wrong with `text` as a size a user typed ("8G", "512M", "1.5G", "4096K", or bytes, at
// most 2⁶³ − 1): "lots is not a size; expected a positive number of bytes with K, M, G or T, e.g.
// 8G"; empty when nothing is, and then `bytes` is the size. An integer is read exactly
// (9223372036854775807 is 2⁶³ − 1 bytes, not a double's 2⁶³), a fraction as a double.
std::string size_problem(const std::string& text, int64_t& bytes);

// "9.7 GiB", "312 MiB", "4.0 KiB", "512 bytes".
std::string bytes_str(int64_t bytes);
// A size computed in floating point (products of lengths overflow int64 quickly) as bytes, at most
// kMaxBytes: estimates compare with a limit, and a saturated one is over any.
inline constexpr int64_t kMaxBytes = int64_t{1} << 62;
int64_t saturated_bytes(double bytes);
// The resident size of a tensor's elements.
int64_t tensor_bytes(const Tensor& t);
// What a qkv process takes before any model or data: its code, the libraries, the thread pool's
// and OpenBLAS's first buffers (measured: 10 MiB for `qkv attend --example`, up to 20 MiB with
// OpenBLAS's threads; allowed for generously).
inline constexpr int64_t kProcessBytes = int64_t{32} << 20;

// Work that would need more memory than its limit. A usage error (Kind::invalid_argument): the
// input asks for too much, and a smaller one or a higher limit runs. The message:
//   "WORK needs about NEED of memory, over the limit of LIMIT (KNOB); expected EXPECTED"
// where the caller names its own knob (the command's --memory-limit, Python's memory_limit) and
// what would fit. The Python package raises it as MemoryError.
class MemoryLimitError : public Error {
 public:
  MemoryLimitError(const std::string& work, int64_t need, int64_t limit, const std::string& knob,
                   const std::string& expected);
  int64_t need() const noexcept { return need_; }
  int64_t limit() const noexcept { return limit_; }

 private:
  int64_t need_, limit_;
};

// Throws MemoryLimitError when need > limit.
void check_memory(int64_t need, int64_t limit, const std::string& work, const std::string& knob,
                  const std::string& expected);

// A limit as a front end takes it: the bytes the user set (0: not set, the default applies) and
// the front end's name for it ("--memory-limit", Python's "memory_limit"), so that a refusal
// says which knob to turn.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string knob = "memory_limit";
  // bytes, or default_memory_limit() when not set.
  int64_t value() const;
  // The knob as a refusal names it; where it was not set, with what bounds the default:
  // "--memory-limit not given: half the machine's memory" (default_memory_limit_bound()).
  std::string named() const;
};
// check_memory against limit.value(), naming limit.named().
void check_memory(int64_t need, const MemoryLimit& limit, const std::string& work,
                  const std::string& expected);

}  // namespace qkv
