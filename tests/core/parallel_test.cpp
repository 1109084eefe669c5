// core/parallel.h: the process's one thread pool (docs/CONVENTIONS.md §3).
//
// parallel_for(n, threads, body) runs body(i, worker) once for every i in [0, n), on at most
// `threads` workers, the caller being worker 0; exceptions reach the caller; a parallel_for inside
// a job runs serially on its caller. default_num_threads() reads $QKV_NUM_THREADS (an integer from
// 1 to 4 × the cores; anything else is an error), else the machine's cores; resolve_num_threads(n)
// is n if positive (and at most 4 × the cores), else that default.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv {
namespace {

// Every item runs exactly once, whatever n and the thread count (more threads than items too).
TEST(ParallelFor, RunsEveryItemExactlyOnce) {
  for (int64_t n : {1, 2, 3, 17, 1000, 10007})
    for (int threads : {1, 2, 3, 8}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", threads = " + std::to_string(threads));
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      parallel_for(n, threads, [&](int64_t i, int) { runs[static_cast<size_t>(i)]++; });
      int64_t wrong = 0;
      for (const auto& r : runs) wrong += r.load() != 1;
      EXPECT_EQ(wrong, 0) << "items not run exactly once";
    }
}

TEST(ParallelFor, NoItemsMeansNoCalls) {
  for (int64_t n : {int64_t{0}, int64_t{-1}, int64_t{-100}}) {
    std::atomic<int> calls{0};
    parallel_for(n, 4, [&](int64_t, int) { calls++; });
    EXPECT_EQ(calls.load(), 0) << "n = " << n;
  }
}

// 0 ≤ worker < threads; worker 0 is the calling thread; one worker id is one thread.
TEST(ParallelFor, WorkerIdsAreInRangeAndWorkerZeroIsTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  for (int threads : {1, 2, 3, 5}) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    std::mutex m;
    std::vector<std::set<std::thread::id>> seen(static_cast<size_t>(threads) + 1);
    bool out_of_range = false;
    parallel_for(2000, threads, [&](int64_t, int worker) {
      std::lock_guard lock(m);
      if (worker < 0 || worker >= threads) {
        out_of_range = true;
        return;
      }
      seen[static_cast<size_t>(worker)].insert(std::this_thread::get_id());
    });
    EXPECT_FALSE(out_of_range);
    for (int w = 0; w < threads; ++w) {
      const auto& ids = seen[static_cast<size_t>(w)];
      EXPECT_LE(ids.size(), 1u) << "worker " << w << " ran on several threads";
      if (w == 0)
        EXPECT_TRUE(ids.empty() || *ids.begin() == caller) << "worker 0 is not the caller";
      if (w > 0) EXPECT_TRUE(ids.empty() || *ids.begin() != caller) << "worker " << w;
    }
  }
  // Fewer items than threads: still in range.
  std::atomic<bool> bad{false};
  parallel_for(2, 8, [&](int64_t, int worker) { bad = bad || worker < 0 || worker >= 8; });
  EXPECT_FALSE(bad.load());
}

// With one thread everything runs on the caller, in increasing order.
TEST(ParallelFor, OneThreadRunsInOrderOnTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int64_t> order;
  bool elsewhere = false;
  parallel_for(100, 1, [&](int64_t i, int worker) {
    order.push_back(i);
    elsewhere = elsewhere || worker != 0 || std::this_thread::get_id() != caller;
  });
  ASSERT_EQ(order.size(), 100u);
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_FALSE(elsewhere);
}

// Two threads really do run at once: item 0 waits until another item has started elsewhere
// (bounded, so a serial pool fails instead of hanging).
TEST(ParallelFor, TwoThreadsRunConcurrently) {
  std::atomic<bool> other_started{false};
  std::atomic<bool> overlapped{false};
  parallel_for(2, 2, [&](int64_t i, int) {
    if (i == 1) {
      other_started = true;
      return;
    }
    for (int spin = 0; spin < 10000 && !other_started; ++spin)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    overlapped = other_started.load();
  });
  EXPECT_TRUE(overlapped.load()) << "item 1 did not start while item 0 was running";
}

struct Boom : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An exception thrown by any item reaches the caller, with its type and message; the pool stays
// usable afterwards.
TEST(ParallelFor, ExceptionsReachTheCaller) {
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    for (int64_t bad_item : {int64_t{0}, int64_t{37}, int64_t{999}}) {
      SCOPED_TRACE("throwing item " + std::to_string(bad_item));
      try {
        parallel_for(1000, threads, [&](int64_t i, int) {
          if (i == bad_item) throw Boom("item " + std::to_string(i));
        });
        ADD_FAILURE() << "no exception";
      } catch (const Boom& e) {
        EXPECT_EQ(std::string(e.what()), "item " + std::to_string(bad_item));
      } catch (...) {
        ADD_FAILURE() << "another exception type";
      }
      // Every item throws: one exception comes out, and nothing hangs.
      EXPECT_THROW(parallel_for(50, threads, [](int64_t, int) { throw Boom("all"); }), Boom);
      // Still works.
      std::atomic<int64_t> sum{0};
      parallel_for(100, threads, [&](int64_t i, int) { sum += i; });
      EXPECT_EQ(sum.load(), 4950);
    }
  }
}

// A parallel_for called from inside a job runs serially on the calling worker (no deadlock, every
// inner item once, inner worker id 0, same thread as the outer item).
TEST(ParallelFor, NestedCallsRunSeriallyOnTheirCaller) {
  constexpr int64_t kOuter = 16, kInner = 50;
  std::vector<std::atomic<int>> runs(static_cast<size_t>(kOuter * kInner));
  std::atomic<bool> moved{false}, nonzero_worker{false};
  parallel_for(kOuter, 2, [&](int64_t i, int) {
    const std::thread::id me = std::this_thread::get_id();
    parallel_for(kInner, 2, [&](int64_t j, int inner_worker) {
      runs[static_cast<size_t>(i * kInner + j)]++;
      if (std::this_thread::get_id() != me) moved = true;
      if (inner_worker != 0) nonzero_worker = true;
    });
  });
  int64_t wrong = 0;
  for (const auto& r : runs) wrong += r.load() != 1;
  EXPECT_EQ(wrong, 0);
  EXPECT_FALSE(moved.load()) << "a nested parallel_for left its caller's thread";
  EXPECT_FALSE(nonzero_worker.load()) << "a nested parallel_for reported a worker other than 0";
  // After nesting, an ordinary call uses the pool again.
  std::atomic<int> calls{0};
  parallel_for(1000, 2, [&](int64_t, int) { calls++; });
  EXPECT_EQ(calls.load(), 1000);
}

// Two threads of the program calling parallel_for at once: both jobs complete, each item once.
TEST(ParallelFor, ConcurrentCallersBothComplete) {
  constexpr int64_t kN = 5000;
  std::vector<std::atomic<int>> a(kN), b(kN);
  auto job = [](std::vector<std::atomic<int>>& runs) {
    for (int rep = 0; rep < 20; ++rep)
      parallel_for(kN / 20, 2,
                   [&](int64_t i, int) { runs[static_cast<size_t>(rep * (kN / 20) + i)]++; });
  };
  std::thread other([&] { job(b); });
  job(a);
  other.join();
  int64_t wrong = 0;
  for (int64_t i = 0; i < kN; ++i) wrong += (a[i].load() != 1) + (b[i].load() != 1);
  EXPECT_EQ(wrong, 0);
}

// Many small jobs back to back (where a lost wake-up or a stale generation would hang or skip).
TEST(ParallelFor, ManySmallJobsInARow) {
  int64_t wrong = 0;
  for (int rep = 0; rep < 3000; ++rep) {
    std::atomic<int> count{0};
    parallel_for(1 + rep % 5, 2 + rep % 3, [&](int64_t, int) { count++; });
    wrong += count.load() != 1 + rep % 5;
  }
  EXPECT_EQ(wrong, 0);
}

// Sets $QKV_NUM_THREADS for the test and puts the original back afterwards.
class ParallelNumThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("QKV_NUM_THREADS")) saved_ = v;
  }
  void TearDown() override {
    if (saved_)
      setenv("QKV_NUM_THREADS", saved_->c_str(), 1);
    else
      unsetenv("QKV_NUM_THREADS");
  }
  static int cores() {
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
  }
  std::optional<std::string> saved_;
};

TEST_F(ParallelNumThreads, UnsetMeansTheMachinesCores) {
  unsetenv("QKV_NUM_THREADS");
  EXPECT_EQ(default_num_threads(), cores());
  EXPECT_GE(default_num_threads(), 1);
}

TEST_F(ParallelNumThreads, APositiveIntegerUpToFourTimesTheCoresIsTheThreadCount) {
  for (const int n : {1, 2, 3, 4 * cores() - 1, 4 * cores()}) {
    const std::string v = std::to_string(n);
    setenv("QKV_NUM_THREADS", v.c_str(), 1);
    EXPECT_EQ(default_num_threads(), n) << "QKV_NUM_THREADS=" << v;
  }
  setenv("QKV_NUM_THREADS", "", 1);  // set but empty: as unset
  EXPECT_EQ(default_num_threads(), cores());
}

// Anything else was silently replaced by the cores, and 4096 was taken (issue 26): a limit the
// user set and got wrong is said.
TEST_F(ParallelNumThreads, AnythingElseIsAnErrorNamingTheVariable) {
  const std::string range = "expected 1 to " + std::to_string(4 * cores()) +
                            " (4 × this machine's " + std::to_string(cores()) +
                            (cores() == 1 ? " core)" : " cores)");
  const std::string more = std::to_string(4 * cores() + 1);
  const std::pair<std::string, std::string> cases[] = {
      {"0", "$QKV_NUM_THREADS: 0 is not a thread count; " + range},
      {"-8", "$QKV_NUM_THREADS: -8 is not a thread count; " + range},
      {more,
       "$QKV_NUM_THREADS: " + more + " is more than " + std::to_string(4 * cores()) + "; " + range},
      {"4096", "$QKV_NUM_THREADS: 4096 is more than " + std::to_string(4 * cores()) + "; " + range},
      {"abc", "$QKV_NUM_THREADS is \"abc\", not an integer; " + range + ", or unset for all cores"},
      {"4x", "$QKV_NUM_THREADS is \"4x\", not an integer; " + range + ", or unset for all cores"},
      {"2.5", "$QKV_NUM_THREADS is \"2.5\", not an integer; " + range + ", or unset for all cores"},
      {"99999999999999999999", "$QKV_NUM_THREADS is \"99999999999999999999\", not an integer; " +
                                   range + ", or unset for all cores"},
  };
  for (const auto& [value, message] : cases) {
    setenv("QKV_NUM_THREADS", value.c_str(), 1);
    try {
      default_num_threads();
      ADD_FAILURE() << "QKV_NUM_THREADS=" << value << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    }
  }
}

TEST_F(ParallelNumThreads, ResolveKeepsAPositiveRequestElseTheDefault) {
  setenv("QKV_NUM_THREADS", "3", 1);
  EXPECT_EQ(resolve_num_threads(4), 4);
  EXPECT_EQ(resolve_num_threads(1), 1);
  EXPECT_EQ(resolve_num_threads(0), 3);
  EXPECT_EQ(resolve_num_threads(-2), 3);
  unsetenv("QKV_NUM_THREADS");
  EXPECT_EQ(resolve_num_threads(0), cores());
}

TEST_F(ParallelNumThreads, ARequestBeyondFourTimesTheCoresIsRefused) {
  EXPECT_EQ(max_num_threads(), 4 * cores());
  EXPECT_EQ(resolve_num_threads(4 * cores()), 4 * cores());
  try {
    resolve_num_threads(4096);
    ADD_FAILURE() << "4096 threads were taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "num_threads: 4096 is more than " +
                                         std::to_string(4 * cores()) + "; expected " +
                                         num_threads_range());
  }
  EXPECT_THROW(check_num_threads(0, "x"), Error);
  EXPECT_EQ(check_num_threads(1, "x"), 1);
  EXPECT_EQ(num_threads_problem(4 * cores()), "");
}

}  // namespace
}  // namespace qkv
