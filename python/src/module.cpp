// The extension qkv._qkv: what python/qkv/__init__.py wraps. qkv::Error becomes ValueError (bad
// input) or RuntimeError (the work failed), with qkv's own one-line message.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "qkv/tensor.h"

namespace nb = nanobind;

NB_MODULE(_qkv, m) {
  m.doc() = "qkv's C++ core; use the package qkv, which wraps it";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
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
