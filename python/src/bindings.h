// python/src/bindings.h — each file of python/src binds one part of qkv into the module.
#pragma once

#include <nanobind/nanobind.h>

namespace qkv::python {

void bind_attention(nanobind::module_& m);  // attention.cpp: qkv::attention and its backward
void bind_models(nanobind::module_& m);     // models.cpp: the sentence encoder, the decoder LLM
void bind_explain(nanobind::module_& m);    // explain.cpp: a captured run and its HTML report
void bind_train(nanobind::module_& m);      // train.cpp: training, the tasks, the experiments

}  // namespace qkv::python
