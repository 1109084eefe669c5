// python/src/unlocked.h — long work (encoding, training, experiments) run without the GIL, that
// still calls back into Python: a progress callable, and Ctrl-C.
//
// Python runs signal handlers only between bytecodes, so a KeyboardInterrupt could not stop a
// training run that never returns to Python; each callback point therefore takes the GIL, runs
// the callable (if any) and PyErr_CheckSignals(). A Python exception raised there must not
// unwind through qkv's C++ as a Python object without the GIL, so it is kept, the work is stopped
// by a plain C++ exception, and the Python exception is raised again once the GIL is back.
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <utility>

namespace qkv::python {

class Unlocked {
 public:
  // Runs work() without the GIL and returns its result; a callback's Python exception (or a
  // KeyboardInterrupt) is raised from here, with the GIL held.
  template <class Work>
  auto run(Work&& work) {
    try {
      nanobind::gil_scoped_release release;
      return std::forward<Work>(work)();
    } catch (const Stopped&) {
      std::rethrow_exception(error_);
    }
  }

  // From inside work(): takes the GIL, runs python() (a callable's call, or nothing), and checks
  // for signals. Either raising stops the work.
  template <class Python>
  void call(Python&& python) {
    nanobind::gil_scoped_acquire gil;
    try {
      std::forward<Python>(python)();
      if (PyErr_CheckSignals() != 0) throw nanobind::python_error();
    } catch (const nanobind::python_error&) {
      error_ = std::current_exception();
      throw Stopped{};
    }
  }
  void check_signals() {
    call([] {});
  }

 private:
  struct Stopped {};
  std::exception_ptr error_;
};

}  // namespace qkv::python
