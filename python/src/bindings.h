// python/src/bindings.h — each file of python/src binds one part of qkv into the module.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "qkv/explain_run.h"
#include "qkv/memory.h"
#include "qkv/tensor.h"

namespace qkv::python {

namespace nb = nanobind;

// Refuses work whose estimate is over the caller's memory_limit (bytes; 0: half the machine's
// memory): a qkv::MemoryLimitError, which the module raises as MemoryError naming both sizes.
inline void check_memory_limit(int64_t need, int64_t memory_limit, const std::string& work,
                               const std::string& expected) {
  check_memory(need, MemoryLimit{.bytes = memory_limit, .knob = "memory_limit"}, work, expected);
}

void bind_attention(nanobind::module_& m);  // attention.cpp: qkv::attention and its backward
void bind_models(nanobind::module_& m);     // models.cpp: the sentence encoder, the decoder LLM
void bind_explain(nanobind::module_& m);    // explain.cpp: a captured run and its HTML report
void bind_train(nanobind::module_& m);      // train.cpp: training, the tasks, the experiments
void bind_files(nanobind::module_& m);      // files.cpp: the files the Python functions write
// values.cpp, from bind_explain: the run's value readings as arrays, and generation explained
void bind_values(nanobind::module_& m, nanobind::class_<explain::Run>& run);

// files.cpp: a path from os.fsencode, and the error of a failed write raised as Python's OSError
// (a usage error as ValueError), its message prefixed (the argument's name, "save: ").
std::string path_of(const nb::bytes& path);
[[noreturn]] void raise_file_error(const Error& e, const std::string& prefix);

}  // namespace qkv::python
