// The extension qkv._qkv: what python/qkv/__init__.py wraps. qkv::Error becomes ValueError (bad
// input) or RuntimeError (the work failed), with qkv's own one-line message; work over its
// memory_limit (qkv::MemoryLimitError) and std::bad_alloc become MemoryError.
#include <nanobind/nanobind.h>

#include <new>

#include "bindings.h"
#include "qkv/memory.h"
#include "qkv/tensor.h"

namespace nb = nanobind;

NB_MODULE(_qkv, m) {
  m.doc() = "qkv's C++ core; use the package qkv, which wraps it";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const qkv::MemoryLimitError& e) {
      // Work the estimate refused before it started: the sizes, as MemoryError.
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const std::bad_alloc&) {
      // The last resort, where no estimate saw it coming (a ulimit, other processes).
      PyErr_SetString(PyExc_MemoryError,
                      "qkv ran out of memory (std::bad_alloc): the memory it could get was less "
                      "than this call needs; expected a smaller input, or more memory free");
    } catch (const qkv::Error& e) {
      PyErr_SetString(e.kind() == qkv::Error::Kind::runtime ? PyExc_RuntimeError : PyExc_ValueError,
                      e.what());
    }
  });
  qkv::python::bind_attention(m);
  qkv::python::bind_models(m);
  qkv::python::bind_explain(m);
  qkv::python::bind_train(m);
  qkv::python::bind_files(m);
}
