// nn/parameters_io.cpp — nn::save_parameters / nn::load_parameters: a module's parameters as a
// safetensors file (core/safetensors.h), every value checked finite on the way in (nn/finite.h).
#include <cstring>
#include <set>
#include <string>

#include "core/dispatch.h"
#include "core/safetensors.h"
#include "nn/finite.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what, Error::Kind::runtime);
}

}  // namespace

void save_parameters(const std::string& path, const std::vector<Parameter*>& params,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> names;
  for (const Parameter* p : params) {
    if (!names.insert(p->name).second)
      throw Error("save_parameters: two parameters are named '" + p->name + "'");
    tensors.emplace_back(p->name, p->value);
  }
  write_safetensors(path, tensors, metadata);
}

// Everything is checked before anything is copied: a file that does not fit leaves the parameters
// as they were. A float32 file loads into float64 parameters exactly, and a float64 file into
// float32 ones rounded to nearest.
std::map<std::string, std::string> load_parameters(const std::string& path,
                                                   const std::vector<Parameter*>& params) {
  const SafetensorsFile file = read_safetensors(path);
  std::set<std::string> expected;
  for (const Parameter* p : params) {
    expected.insert(p->name);
    const auto it = file.tensors.find(p->name);
    if (it == file.tensors.end()) {
      if (file.skipped.contains(p->name))
        fail(path, "parameter '" + p->name + "' is stored as " + file.skipped.at(p->name) +
                       ", not a float type");
      fail(path, "parameter '" + p->name + "' is missing");
    }
    const Tensor& t = it->second;
    if (t.shape() != p->value.shape())
      fail(path, "parameter '" + p->name + "' has shape " + shape_str(t.shape()) +
                     " but the model expects " + shape_str(p->value.shape()));
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
      fail(path, "parameter '" + p->name + "' is stored as " + std::string(dtype_name(t.dtype())) +
                     ", not float32 or float64");
    require_finite_tensor(path, p->name, t);
  }
  for (const std::string& name : file.names)
    if (!expected.contains(name))
      fail(path, "tensor '" + name + "' is not a parameter of the model");
  for (Parameter* p : params) {
    const Tensor t = file.tensors.at(p->name).to(p->value.dtype());  // a contiguous copy
    if (!p->value.is_contiguous() || t.numel() == 0) {
      p->value = t;
      continue;
    }
    // In place: every holder of p->value's storage sees the loaded values.
    dispatch_float(t.dtype(), [&]<class T>(T) {
      std::memcpy(p->value.data<T>(), t.data<T>(), t.numel() * sizeof(T));
    });
  }
  return file.metadata;
}

}  // namespace qkv::nn
