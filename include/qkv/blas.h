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

// For a program's first line, under an address-space limit (ulimit -v; nothing otherwise): throws
// qkv::Error (Kind::runtime) unless the process has room for a buffer (128 MiB) for each thread
// OpenBLAS started as it loaded and one for the caller. Those threads map theirs as they start,
// before main or just after it; where one finds no room it retries forever, and such a process
// never finishes, not even its exit (OpenBLAS's shutdown waits for it), so the caller should
// report the error and end with std::_Exit. With the room, it waits for them to map theirs and
// has OpenBLAS map the caller's at once, so that the work's own allocations cannot take it.
// The message names the limit and the room a run needs.
void check_room_for_blas(const char* program);

}  // namespace qkv
