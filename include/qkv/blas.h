// qkv/blas.h — OpenBLAS's own threads, for a program that sizes them with qkv's (the qkv
// command's --threads). qkv's unfused attention path and its dense layers multiply through
// OpenBLAS; why its threads need care is in src/kernels/cpu/blas_threads.h.
#pragma once

namespace qkv {

// Sets the threads OpenBLAS runs one call on to min(threads, the machine's cores): more would only
// wait for one another, and each thread OpenBLAS starts maps a buffer of 128 MiB. Checks first
// that the threads OpenBLAS would have to start can map theirs — where OpenBLAS itself would retry
// forever — and throws qkv::Error (Kind::runtime) when they cannot. threads < 1 counts as 1.
void set_blas_threads(int threads);

// For a program's first line: throws qkv::Error (Kind::runtime) when the process's address space
// has no room left for one more OpenBLAS buffer (128 MiB) — under a tight `ulimit -v`, where the
// threads OpenBLAS started when it loaded, each mapping its buffer, are already retrying forever,
// and the caller's first multiplication would do the same. Such a process never finishes, not even
// its exit (OpenBLAS's shutdown waits for those threads), so the caller should report the error
// and end with std::_Exit. The message names the limit and the room a run needs.
void check_room_for_blas(const char* program);

}  // namespace qkv
