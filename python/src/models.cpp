// The models for Python: the sentence encoder (encode, explain) and training (issue 15).
#include "bindings.h"

namespace qkv::python {

void bind_models(nanobind::module_&) {}

}  // namespace qkv::python
