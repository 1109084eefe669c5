// OpenBLAS's threads and buffers, as qkv uses them.
//
// Two pools on two cores fight (OpenBLAS's idle workers spin after each call and take the core
// qkv's workers need), so while qkv's pool splits the work OpenBLAS is held at one thread.
//
// Buffers: OpenBLAS (0.3.21, as Debian builds it) gives each thread that calls it a buffer of
// 128 MiB of address space (BUFFER_SIZE in its common_x86_64.h), mapped on the thread's first call
// and kept for the thread's life; each of its own worker threads maps one when it starts. When the
// mapping fails, OpenBLAS does not report it: it retries forever (blas_memory_alloc in
// driver/others/memory.c; OpenBLAS issue 5289, made an exit in 0.3.30). Under an address-space
// limit (ulimit -v) too small for the threads asked for, `qkv train --threads 50` spun without end
// (issue 26). So before threads that have not called OpenBLAS yet may do so, the space of their
// buffers is mapped once (never touched) and released: if it cannot be, the caller gets a
// qkv::Error (Kind::runtime) instead of a hang. (Another thread could take the space between the
// check and OpenBLAS's own mapping; qkv runs one job at a time, so only a program's own threads
// could.)
#pragma once

namespace qkv::cpu {

// Holds OpenBLAS at one thread for its lifetime, restoring the previous count afterwards. With
// `workers` > 0, first checks that that many of qkv's workers can each get an OpenBLAS buffer
// (those that already hold one need none).
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

// Notes that the calling thread holds an OpenBLAS buffer from now on: called by every job body of
// the pool before it calls OpenBLAS, so that the checks above count it once.
void note_blas_caller();

}  // namespace qkv::cpu
