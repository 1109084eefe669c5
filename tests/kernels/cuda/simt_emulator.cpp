// The fibers behind simt_emulator.h: one stack per thread of the running block, a scheduler
// that resumes every fiber not waiting at a barrier, and barriers that count the block's (or the
// warp's) live threads, so a thread that has returned no longer holds the others back (as on the
// GPU since Volta).
#include "kernels/cuda/simt_emulator.h"

#include <setjmp.h>
#include <ucontext.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace qkv::simt {
namespace {

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr std::size_t kMaxShared = 227 * 1024;

enum class Wait { none, block, warp };

// A fiber starts once through makecontext/setcontext and from then on switches with
// _setjmp/_longjmp, which (unlike swapcontext) leave the signal mask alone: no system call per
// switch, which was 60% of the emulated tests' time.
struct Fiber {
  ucontext_t context;  // the first entry only
  jmp_buf resume;
  bool started = false;
  std::unique_ptr<char[]> stack;
  dim3 index;
  int linear = 0;
  bool done = false;
  Wait wait = Wait::none;
  uint64_t wait_generation = 0;
};

struct Warp {
  int alive = 0, arrived = 0;
  uint64_t generation = 0;
  std::array<uint64_t, 32> slots{};
  std::array<std::array<uint32_t, 6>, 32> fragments{};  // a[4], b[2] per lane for the mma
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  int alive = 0, arrived = 0;
  uint64_t generation = 0;
  jmp_buf scheduler;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
};

Block* running = nullptr;
Order order = Order::forward;
std::vector<unsigned char> shared_memory;
Counters launch_counters;

Fiber& me() {
  if (running == nullptr || running->current == nullptr) {
    std::fprintf(stderr, "simt emulator: a device function ran outside a launch\n");
    std::abort();
  }
  return *running->current;
}
Warp& my_warp() { return running->warps[me().linear / 32]; }

void yield_waiting(Wait wait, uint64_t generation) {
  Fiber& f = me();
  f.wait = wait;
  f.wait_generation = generation;
  if (_setjmp(f.resume) == 0) _longjmp(running->scheduler, 1);
}

// Arrival at a barrier of `alive` threads: the last to arrive opens it and goes on; the others
// wait for the generation to change.
void arrive(int& arrived, int alive, uint64_t& generation, Wait wait) {
  if (++arrived >= alive) {
    arrived = 0;
    ++generation;
    return;
  }
  yield_waiting(wait, generation);
}

void fiber_entry() {
  (*running->body)();
  Fiber& f = me();
  f.done = true;
  Block& b = *running;
  Warp& w = b.warps[f.linear / 32];
  // A returned thread leaves the barriers it would have been counted in.
  if (--b.alive > 0 && b.arrived > 0 && b.arrived >= b.alive) b.arrived = 0, ++b.generation;
  if (--w.alive > 0 && w.arrived > 0 && w.arrived >= w.alive) w.arrived = 0, ++w.generation;
  _longjmp(b.scheduler, 1);  // a finished fiber never returns through its first context
}

float from_bf16(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
float from_f16(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return __uint_as_float(sign | static_cast<uint32_t>(exponent - 15 + 127) << 23 | mantissa << 13);
}

}  // namespace

const char* error_string(Status e) {
  switch (e) {
    case kSuccess:
      return "no error";
    case kLaunchFailure:
      return "emulated launch failed";
    case kOutOfMemory:
      return "out of memory";
    case kInvalidConfiguration:
      return "invalid configuration argument";
  }
  return "unknown error";
}

void set_order(Order o) { order = o; }
void* dynamic_shared() { return shared_memory.data(); }
Counters& counters() { return launch_counters; }

int linear_thread() { return me().linear; }

void sync_block() {
  Block& b = *running;
  arrive(b.arrived, b.alive, b.generation, Wait::block);
}
void sync_warp() {
  Warp& w = my_warp();
  arrive(w.arrived, w.alive, w.generation, Wait::warp);
}

uint64_t exchange(uint64_t value, int source) {
  Warp& w = my_warp();
  const int lane = me().linear % 32;
  w.slots[lane] = value;
  sync_warp();
  const uint64_t r = w.slots[source & 31];
  sync_warp();
  return r;
}

void emulated_mma_16816(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  Warp& w = my_warp();
  const int lane = me().linear % 32;
  if (w.alive != 32) {
    std::fprintf(stderr, "simt emulator: mma.sync needs all 32 lanes of the warp\n");
    std::abort();
  }
  for (int r = 0; r < 4; ++r) w.fragments[lane][r] = a[r];
  w.fragments[lane][4] = b[0], w.fragments[lane][5] = b[1];
  sync_warp();
  auto half = [&](uint32_t reg, int which) {
    const uint16_t h = static_cast<uint16_t>(which == 0 ? reg & 0xffffu : reg >> 16);
    return bf16 ? from_bf16(h) : from_f16(h);
  };
  // A (16×16) and B (16×8) from every lane's fragment, by mma.cuh's table.
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const auto& f = w.fragments[l];
    for (int e = 0; e < 2; ++e) {
      A[g][2 * t + e] = half(f[0], e);
      A[g + 8][2 * t + e] = half(f[1], e);
      A[g][2 * t + 8 + e] = half(f[2], e);
      A[g + 8][2 * t + 8 + e] = half(f[3], e);
      B[2 * t + e][g] = half(f[4], e);
      B[2 * t + 8 + e][g] = half(f[5], e);
    }
  }
  const int g = lane / 4, t = lane % 4;
  for (int r = 0; r < 4; ++r) {
    const int row = g + (r >= 2 ? 8 : 0), col = 2 * t + (r & 1);
    float sum = 0;
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[r] += sum;
  }
  sync_warp();
}

Status run_grid(dim3 grid, dim3 block, std::size_t shared_bytes,
                const std::function<void()>& body) {
  const long threads = static_cast<long>(block.x) * block.y * block.z;
  if (threads <= 0 || threads > 1024 || shared_bytes > kMaxShared || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.y > 65535 || grid.z > 65535)
    return kInvalidConfiguration;
  if (running != nullptr) return kLaunchFailure;  // no launches from inside a kernel
  ++launch_counters.launches;
  Block b;
  b.fibers.resize(static_cast<std::size_t>(threads));
  for (auto& f : b.fibers) f.stack.reset(new char[kStackBytes]);
  b.warps.resize(static_cast<std::size_t>((threads + 31) / 32));
  b.body = &body;
  gridDim = grid, blockDim = block;
  shared_memory.assign(shared_bytes + 16, 0);
  running = &b;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        ++launch_counters.blocks;
        blockIdx = dim3(bx, by, bz);
        std::fill(shared_memory.begin(), shared_memory.end(), 0);
        b.alive = static_cast<int>(threads), b.arrived = 0;
        for (std::size_t w = 0; w < b.warps.size(); ++w) {
          b.warps[w] = Warp{};
          b.warps[w].alive =
              static_cast<int>(std::min<long>(32, threads - 32 * static_cast<long>(w)));
        }
        for (long t = 0; t < threads; ++t) {
          Fiber& f = b.fibers[static_cast<std::size_t>(t)];
          f.linear = static_cast<int>(t);
          f.index = dim3(static_cast<unsigned>(t % block.x),
                         static_cast<unsigned>((t / block.x) % block.y),
                         static_cast<unsigned>(t / (static_cast<long>(block.x) * block.y)));
          f.done = false, f.wait = Wait::none, f.started = false;
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack.get();
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = nullptr;
          makecontext(&f.context, fiber_entry, 0);
        }
        for (;;) {
          bool ran = false, all_done = true;
          for (long n = 0; n < threads; ++n) {
            const long t = order == Order::forward ? n : threads - 1 - n;
            Fiber& f = b.fibers[static_cast<std::size_t>(t)];
            if (f.done) continue;
            all_done = false;
            const uint64_t generation = f.wait == Wait::block  ? b.generation
                                        : f.wait == Wait::warp ? b.warps[f.linear / 32].generation
                                                               : 0;
            if (f.wait != Wait::none && generation == f.wait_generation) continue;
            f.wait = Wait::none;
            b.current = &f;
            threadIdx = f.index;
            if (_setjmp(b.scheduler) == 0) {
              if (!f.started) {
                f.started = true;
                setcontext(&f.context);
              }
              _longjmp(f.resume, 1);
            }
            b.current = nullptr;
            ran = true;
          }
          if (all_done) break;
          if (!ran) {
            std::fprintf(stderr,
                         "simt emulator: block (%u, %u, %u) deadlocked: its threads wait at "
                         "barriers that not all of them reach\n",
                         bx, by, bz);
            std::abort();
          }
        }
      }
  running = nullptr;
  return kSuccess;
}

Status device_alloc(void** p, std::size_t bytes, void*) {
  *p = std::malloc(bytes > 0 ? bytes : 1);
  return *p != nullptr ? kSuccess : kOutOfMemory;
}
Status device_free(void* p, void*) {
  std::free(p);
  return kSuccess;
}
Status device_zero(void* p, std::size_t bytes, void*) {
  std::memset(p, 0, bytes);
  return kSuccess;
}

}  // namespace qkv::simt
