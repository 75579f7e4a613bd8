// im2col/col2im through the C++ API against ATen's own at::im2col/at::col2im.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <customops/fold.h>

#include <vector>

namespace {

std::vector<c10::Device> devices() {
  std::vector<c10::Device> out{c10::kCPU};
  if (torch::cuda::is_available()) out.emplace_back(c10::kCUDA);
  return out;
}

struct Window {
  std::vector<int64_t> k, d, p, s;
};

const std::vector<Window> kWindows = {
    {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
    {{2, 3}, {2, 1}, {1, 0}, {2, 3}},
    {{1, 1}, {1, 1}, {0, 0}, {1, 1}},
    {{3, 5}, {2, 2}, {2, 3}, {2, 1}},
};

TEST(Fold, Im2colAndCol2imMatchATen) {
  for (const auto& device : devices()) {
    for (const auto dtype : {at::kFloat, at::kDouble}) {
      for (const auto& w : kWindows) {
        const auto x = torch::randn({2, 3, 13, 11}, torch::dtype(dtype).device(device));
        const auto cols = customops::im2col(x, w.k, w.d, w.p, w.s);
        const auto expected = at::im2col(x, w.k, w.d, w.p, w.s);
        ASSERT_EQ(cols.sizes(), expected.sizes());
        EXPECT_TRUE(at::equal(cols, expected));  // a pure copy: bit-exact

        const auto c = torch::randn_like(expected);
        EXPECT_TRUE(at::allclose(customops::col2im(c, {13, 11}, w.k, w.d, w.p, w.s),
                                 at::col2im(c, {13, 11}, w.k, w.d, w.p, w.s), 1e-5, 1e-6));
      }
    }
  }
}

TEST(Fold, GradientsAreEachOther) {
  for (const auto& device : devices()) {
    const Window w = kWindows[1];
    const auto x = torch::randn({2, 3, 13, 11}, torch::dtype(torch::kDouble).device(device)).requires_grad_(true);
    const auto cols = customops::im2col(x, w.k, w.d, w.p, w.s);
    const auto g = torch::randn_like(cols);
    cols.backward(g);
    EXPECT_TRUE(at::allclose(x.grad(), customops::col2im(g, {13, 11}, w.k, w.d, w.p, w.s)));
    EXPECT_TRUE(at::allclose(customops::im2col_backward(g, {13, 11}, w.k, w.d, w.p, w.s),
                             customops::col2im(g, {13, 11}, w.k, w.d, w.p, w.s)));
    EXPECT_TRUE(at::equal(customops::col2im_backward(x.detach(), w.k, w.d, w.p, w.s),
                          customops::im2col(x.detach(), w.k, w.d, w.p, w.s)));
  }
}

TEST(Fold, Col2imIsDeterministic) {
  for (const auto& device : devices()) {
    const auto c = torch::randn({4, 3 * 9, 11 * 9}, torch::dtype(torch::kFloat).device(device));
    const auto first = customops::col2im(c, {11, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(at::equal(first, customops::col2im(c, {11, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1})));
    }
  }
}

TEST(Fold, BadWindowsRaise) {
  const auto x = torch::randn({1, 2, 5, 5});
  EXPECT_THROW(customops::im2col(x, {7, 7}, {1, 1}, {0, 0}, {1, 1}), c10::Error);
  EXPECT_THROW(customops::im2col(x, {3, 3}, {1, 1}, {1, 1}, {0, 1}), c10::Error);
  EXPECT_THROW(customops::col2im(torch::randn({1, 10, 25}), {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}), c10::Error);
}

} // namespace
