// The process's thread pool: workers sleep on a condition variable between jobs and claim the
// items of a job from an atomic counter. Before sleeping, a worker (and a caller waiting for its
// helpers) spins for a moment: a model runs dozens of short jobs back to back, and a futex
// wake-up between each costs tens of microseconds on this VM (measured: one 12-token sentence
// through MiniLM took 5.7 ms with sleeping workers, ~4 ms with spinning ones). One job runs at a
// time; a parallel_for called from inside a job runs serially on its caller, so nesting never
// deadlocks.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv {
namespace {

thread_local bool t_inside_job = false;

// Spins until done() or `kSpin` has passed; true if done() came first.
template <class Done>
bool spin_until(Done done) {
  constexpr auto kSpin = std::chrono::microseconds(200);
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() - start > kSpin) return false;
  }
  return true;
}

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int64_t n, int threads, const std::function<void(int64_t, int)>& body) {
    std::lock_guard job_lock(job_mutex_);  // one job at a time
    {
      std::lock_guard lock(mutex_);
      while (static_cast<int>(threads_.size()) < threads - 1) {
        const int id = static_cast<int>(threads_.size()) + 1;
        try {
          threads_.emplace_back([this, id] { worker(id); });
        } catch (const std::system_error& e) {  // e.g. no room for its stack under ulimit -v
          throw Error("cannot start thread " + std::to_string(id + 1) + " of " +
                          std::to_string(threads) + ": " + e.what() +
                          "; expected fewer threads, or more memory",
                      Error::Kind::runtime);
        }
      }
      body_ = &body;
      n_ = n;
      next_.store(0);
      helpers_ = threads - 1;
      running_ = threads - 1;
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    work(0);
    spin_until([this] { return running_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void worker(int id) {
    uint64_t seen = 0;
    while (true) {
      spin_until([&] { return published_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && id <= helpers_); });
        if (stopping_) return;
        seen = generation_;
      }
      work(id);
      std::lock_guard lock(mutex_);
      if (--running_ == 0) done_.notify_one();
    }
  }

  void work(int id) {
    t_inside_job = true;
    for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
      try {
        (*body_)(i, id);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(n_);  // stop handing out items
      }
    }
    t_inside_job = false;
  }

  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int helpers_ = 0;
  std::atomic<int> running_{0};  // helpers still working; changed under mutex_
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};  // generation_, readable without the lock
  bool stopping_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int num_cores() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

int max_num_threads() { return kThreadsPerCore * num_cores(); }

std::string num_threads_range() {
  const int cores = num_cores();
  return "1 to " + std::to_string(max_num_threads()) + " (" + std::to_string(kThreadsPerCore) +
         " × this machine's " + std::to_string(cores) + (cores == 1 ? " core)" : " cores)");
}

std::string num_threads_problem(int64_t n) {
  if (n < 1) return std::to_string(n) + " is not a thread count; expected " + num_threads_range();
  if (n > max_num_threads())
    return std::to_string(n) + " is more than " + std::to_string(max_num_threads()) +
           "; expected " + num_threads_range();
  return {};
}

int check_num_threads(int64_t n, const std::string& what) {
  if (const std::string problem = num_threads_problem(n); !problem.empty())
    throw Error(what + ": " + problem);
  return static_cast<int>(n);
}

namespace {
std::atomic<int> g_num_threads{0};  // set_num_threads's; 0: unset
}  // namespace

void set_num_threads(int n) {
  g_num_threads.store(n == 0 ? 0 : check_num_threads(n, "num_threads"));
}

int default_num_threads() {
  if (const int set = g_num_threads.load(); set > 0) return set;
  const char* env = std::getenv("QKV_NUM_THREADS");
  if (env == nullptr || *env == '\0') return num_cores();
  // Set but wrong is said, not ignored: the user meant to limit the threads.
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(env, &end, 10);
  // Digits with an optional '-' only: strtoll also takes " 2" and "+2", which the --threads
  // option refuses (issue 26).
  const bool digits = std::string_view(env).find_first_not_of("-0123456789") == std::string::npos;
  if (!digits || end == env || *end != '\0' || errno == ERANGE)
    throw Error("$QKV_NUM_THREADS is \"" + std::string(env).substr(0, 40) +
                "\", not an integer; expected " + num_threads_range() + ", or unset for all cores");
  return check_num_threads(n, "$QKV_NUM_THREADS");
}

int resolve_num_threads(int requested) {
  return requested > 0 ? check_num_threads(requested, "num_threads") : default_num_threads();
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t, int)>& body) {
  if (n <= 0) return;
  const int workers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), n));
  if (workers == 1 || t_inside_job) {
    for (int64_t i = 0; i < n; ++i) body(i, 0);
    return;
  }
  pool().run(n, workers, body);
}

}  // namespace qkv
