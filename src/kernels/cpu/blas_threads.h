// OpenBLAS's own threads, held at one while qkv's pool splits the work: two pools on two cores
// fight (OpenBLAS's idle workers spin after each call and take the core qkv's workers need).
#pragma once

namespace qkv::cpu {

// Holds OpenBLAS at one thread for its lifetime, restoring the previous count afterwards.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

}  // namespace qkv::cpu
