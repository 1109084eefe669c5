// core/dispatch.h: dispatch_float(dtype, f) calls f(float{}) for float32 and f(double{}) for
// float64, returns what f returns, and refuses any other dtype (bool) with a qkv::Error naming it.
#include "core/dispatch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace qkv {
namespace {

TEST(DispatchFloat, Float32CallsWithFloat) {
  EXPECT_EQ(dispatch_float(DType::f32, []<class T>(T) { return sizeof(T); }), sizeof(float));
  EXPECT_TRUE(dispatch_float(DType::f32, []<class T>(T) { return std::is_same_v<T, float>; }));
}

TEST(DispatchFloat, Float64CallsWithDouble) {
  EXPECT_EQ(dispatch_float(DType::f64, []<class T>(T) { return sizeof(T); }), sizeof(double));
  EXPECT_TRUE(dispatch_float(DType::f64, []<class T>(T) { return std::is_same_v<T, double>; }));
}

// The return value passes through, a reference as a reference; a void f is fine too.
TEST(DispatchFloat, ReturnsWhatFReturns) {
  const Tensor x = Tensor::from({3}, {1.0, 2.0, 4.0});
  const double sum = dispatch_float(x.dtype(), [&]<class T>(T) {
    double s = 0;
    for (int64_t i = 0; i < x.numel(); ++i) s += x.data<T>()[i];
    return s;
  });
  EXPECT_EQ(sum, 7.0);

  int target = 0;
  int& ref = dispatch_float(DType::f32, [&]<class T>(T) -> int& { return target; });
  EXPECT_EQ(&ref, &target);

  Tensor y({2}, DType::f32);
  dispatch_float(y.dtype(), [&]<class T>(T) { y.data<T>()[1] = T(5); });
  EXPECT_EQ(y.data<float>()[1], 5.0f);
}

TEST(DispatchFloat, BoolThrowsNamingTheDtype) {
  bool called = false;
  try {
    dispatch_float(DType::b8, [&]<class T>(T) { called = true; });
    FAIL() << "expected qkv::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_THAT(e.what(), testing::HasSubstr("bool"));
  }
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace qkv
