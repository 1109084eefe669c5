// tests/usage_error.h — the message of the usage error a call throws, for tests that compare it.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

#include "qkv/tensor.h"

namespace qkv::test {

// The message of the qkv::Error that `f` throws; a test failure if it throws nothing or another
// type, or an Error that is not a usage error (Kind::invalid_argument).
inline std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a std::exception that is not qkv::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

}  // namespace qkv::test
