// core/json.h — tensors as JSON, the one writer every JSON output of qkv uses (`qkv attend
// --json`, `qkv explain --json`): nested arrays in C order, numbers as JSON numbers, and the three
// values JSON has no number for as the strings Python's json module and JavaScript print for
// them: "NaN", "Infinity", "-Infinity". An undefined tensor is null.
#pragma once

#include <nlohmann/json.hpp>

#include "qkv/tensor.h"

namespace qkv {

nlohmann::json number_json(double x);
nlohmann::json tensor_json(const Tensor& t);

}  // namespace qkv
