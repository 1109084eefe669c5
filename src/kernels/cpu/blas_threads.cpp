#include "kernels/cpu/blas_threads.h"

#include <cblas.h>

namespace qkv::cpu {

SingleThreadedBlas::SingleThreadedBlas() : previous_(openblas_get_num_threads()) {
  if (previous_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ != 1) openblas_set_num_threads(previous_);
}

}  // namespace qkv::cpu
