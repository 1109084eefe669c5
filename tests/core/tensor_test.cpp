// Tensor views: narrow (with transpose and contiguous) reads the entries it should; borrow views
// memory someone else owns.
#include "qkv/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace qkv {
namespace {

using ::testing::HasSubstr;

Tensor iota(Shape shape) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(TensorNarrow, SelectsAColumnBlockWithoutCopying) {
  const Tensor t = iota({3, 4});
  const Tensor block = t.narrow(1, 1, 2);  // columns 1 and 2
  EXPECT_EQ(block.shape(), (Shape{3, 2}));
  EXPECT_EQ(block.strides(), (Shape{4, 1}));
  EXPECT_FALSE(block.is_contiguous());
  EXPECT_EQ(block.at<float>(0, 0), 1.0f);
  EXPECT_EQ(block.at<float>(2, 1), 10.0f);
  EXPECT_EQ(block.data<float>(), t.data<float>() + 1);  // a view of the same storage
  const Tensor copy = block.contiguous();
  EXPECT_EQ(copy.value(0), 1);
  EXPECT_EQ(copy.value(1), 2);
  EXPECT_EQ(copy.value(5), 10);
}

TEST(TensorNarrow, SplitsAFusedProjectionIntoHeads) {
  // [B=1, L=2, 3·H=6, D=2]: q, k, v heads side by side, as a fused QKV projection leaves them.
  const Tensor qkv = iota({1, 2, 6, 2});
  const Tensor k = qkv.narrow(2, 2, 2).transpose(1, 2);  // [1, H=2, L=2, D=2]
  EXPECT_EQ(k.shape(), (Shape{1, 2, 2, 2}));
  // k[0, h, l, d] = qkv[0, l, 2 + h, d] = l·12 + (2 + h)·2 + d
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t d = 0; d < 2; ++d)
        EXPECT_EQ(k.at<float>(0, h, l, d), static_cast<float>(l * 12 + (2 + h) * 2 + d));
}

TEST(TensorNarrow, EmptyAndOutOfRange) {
  const Tensor t = iota({3, 4});
  EXPECT_EQ(t.narrow(0, 3, 0).numel(), 0);
  EXPECT_THAT([&] { t.narrow(1, 3, 2); }, ::testing::Throws<Error>());
  try {
    t.narrow(2, 0, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out of range"));
  }
  try {
    t.narrow(0, -1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not fit dimension 0 of shape [3, 4]"));
  }
}

// Tensor::borrow (the Python module's NumPy views): the caller's memory, read and written in
// place through its strides; the owner released with the last view, not before.
TEST(TensorBorrow, ViewsTheCallersMemoryAndReleasesTheOwnerAfterTheLastView) {
  auto memory = std::make_shared<std::vector<float>>(std::vector<float>{0, 1, 2, 3, 4, 5});
  std::weak_ptr<std::vector<float>> alive = memory;
  float* data = memory->data();
  {
    // [3, 2] read as its transpose [2, 3]: strides (1, 2).
    const Tensor t = Tensor::borrow(data, {2, 3}, {1, 2}, DType::f32, std::move(memory));
    EXPECT_EQ(t.data<float>(), data);
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_EQ(t.at<float>(1, 2), 5.0f);
    EXPECT_EQ(t.at<float>(0, 1), 2.0f);
    const Tensor c = t.contiguous();  // a copy: the owner stays with t
    EXPECT_NE(c.data<float>(), data);
    EXPECT_EQ(c.value(1), 2.0);
    Tensor view = t.narrow(1, 1, 2);
    EXPECT_FALSE(alive.expired());
    view.at<float>(0, 0) = 42;  // writes through to the caller's memory
    EXPECT_EQ(data[2], 42.0f);
  }
  EXPECT_TRUE(alive.expired());
}

TEST(TensorBorrow, RejectsNegativeStridesMisalignedDataAndHighRanks) {
  alignas(8) float buffer[4] = {};
  auto none = std::shared_ptr<void>();
  EXPECT_THROW(Tensor::borrow(buffer, {2}, {-1}, DType::f32, none), Error);
  EXPECT_THROW(Tensor::borrow(reinterpret_cast<char*>(buffer) + 2, {1}, {1}, DType::f32, none),
               Error);
  EXPECT_THROW(Tensor::borrow(buffer, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, DType::f32, none), Error);
  EXPECT_THROW(Tensor::borrow(buffer, {2, 2}, {1}, DType::f32, none), Error);
  EXPECT_THROW(Tensor::borrow(nullptr, {2}, {1}, DType::f32, none), Error);
  const Tensor ok = Tensor::borrow(buffer, {2, 2}, {2, 1}, DType::f32, none);
  EXPECT_TRUE(ok.is_contiguous());
}

}  // namespace
}  // namespace qkv
