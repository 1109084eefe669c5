// Files the Python functions write (Explanation.html, train(save=...)), written as qkv's command
// writes its own (include/qkv/files.h): a temporary beside the file renamed into place, a device
// or a FIFO written in place and never replaced, every failed write an error. Paths arrive as
// bytes (os.fsencode), so that a file name that is not UTF-8 reaches the file system as it is.
#include "qkv/files.h"

#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"

namespace qkv::python {

std::string path_of(const nb::bytes& path) { return std::string(path.c_str(), path.size()); }

void raise_file_error(const Error& e, const std::string& prefix) {
  // A file that cannot be written is the OSError Python's own open() and write() would raise; a
  // usage error (a directory, two names of one file) stays a ValueError.
  PyErr_SetString(e.kind() == Error::Kind::runtime ? PyExc_OSError : PyExc_ValueError,
                  (prefix + e.what()).c_str());
  throw nb::python_error();
}

void bind_files(nb::module_& m) {
  m.def(
      "check_output",
      [](const std::string& prefix, const nb::bytes& path) {
        try {
          check_outputs({{.option = "", .path = path_of(path)}});
        } catch (const Error& e) {
          // check_outputs names the option, then the path: "" gives a leading space.
          const std::string message = e.what();
          raise_file_error(Error(message.substr(message.starts_with(' ') ? 1 : 0), e.kind()),
                           prefix);
        }
      },
      nb::arg("prefix"), nb::arg("path"),
      "check_outputs for one path: OSError when its folder cannot be written.");
  m.def(
      "write_file",
      [](const std::string& prefix, const nb::bytes& path, const nb::bytes& data) {
        const std::string file = path_of(path), bytes(data.c_str(), data.size());
        try {
          nb::gil_scoped_release release;
          write_files_atomically({{file, bytes}});
        } catch (const Error& e) {
          raise_file_error(e, prefix);
        }
      },
      nb::arg("prefix"), nb::arg("path"), nb::arg("data"),
      "write_files_atomically for one file: OSError naming the path when it cannot be written.");
}

}  // namespace qkv::python
