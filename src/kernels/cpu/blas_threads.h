// OpenBLAS's threads and buffers, as qkv uses them.
//
// Two pools on two cores fight (OpenBLAS's idle workers spin after each call and take the core
// qkv's workers need), so while qkv's pool splits the work OpenBLAS is held at one thread.
//
// Buffers: OpenBLAS (0.3.21, as Debian builds it) gives each call a buffer of 128 MiB of address
// space (BUFFER_SIZE in its common_x86_64.h) from a table of slots shared by all threads: a call
// takes the first slot no other call holds and maps a buffer into it if it has none; buffers stay
// mapped for the process's life. So it maps as many buffers as calls were ever inside it at once,
// whichever threads made them, and the call that maps one may come long after a thread's first.
// Each of its own worker threads holds one slot from its start. When the mapping fails, OpenBLAS
// does not report it: it retries forever (blas_memory_alloc in driver/others/memory.c; OpenBLAS
// issue 5289, made an exit in 0.3.30). Under an address-space limit (ulimit -v) too small for the
// threads asked for, `qkv train --threads 50` spun without end (issue 26). So before qkv's workers
// may call OpenBLAS together, the space of the buffers OpenBLAS lacks for them is checked and
// OpenBLAS maps them there and then: if the space is not there, the caller gets a qkv::Error
// (Kind::runtime) instead of a hang. (Calls into OpenBLAS from threads other than those counted —
// a program's own, at the same time — could still make it map more.)
#pragma once

namespace qkv::cpu {

// Holds OpenBLAS at one thread for its lifetime, restoring the previous count afterwards. With
// `workers` > 0, first has OpenBLAS hold buffers for that many calls at once (at most 64), checking
// the room for those it lacks.
class SingleThreadedBlas {
 public:
  explicit SingleThreadedBlas(int workers = 0);
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

// Holds OpenBLAS at set_blas_threads(threads) (qkv/blas.h) for its lifetime, restoring the
// previous count afterwards.
class BlasThreads {
 public:
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int previous_;
};

}  // namespace qkv::cpu
