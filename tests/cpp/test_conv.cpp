// conv2d and depthwise_conv2d through the C++ API against ATen's at::conv2d and
// at::convolution_backward.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <customops/backends.h>
#include <customops/conv.h>

#include <cstdlib>
#include <vector>

namespace {

std::vector<c10::Device> devices() {
  std::vector<c10::Device> out{c10::kCPU};
  if (torch::cuda::is_available()) out.emplace_back(c10::kCUDA);
  return out;
}

struct Geometry {
  std::vector<int64_t> s, p, d;
};

const std::vector<Geometry> kGeometries = {
    {{1, 1}, {1, 1}, {1, 1}},
    {{2, 1}, {0, 2}, {1, 2}},
    {{1, 1}, {0, 0}, {1, 1}},
};

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const char* what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::allclose(actual, expected, 1e-9, 1e-9)) << what;
}

TEST(Conv, Conv2dMatchesATenForwardAndBackward) {
  for (const auto& device : devices()) {
    const auto opts = torch::dtype(torch::kDouble).device(device);
    for (const auto& g : kGeometries) {
      for (const int64_t groups : {1, 2}) {
        const auto x = torch::randn({3, 4, 11, 9}, opts);
        const auto w = torch::randn({6, 4 / groups, 3, 2}, opts);
        const auto b = torch::randn({6}, opts);
        const auto y = customops::conv2d(x, w, b, g.s, g.p, g.d, groups);
        expect_close(y, at::conv2d(x, w, b, g.s, g.p, g.d, groups), "forward");

        const auto gy = torch::randn_like(y);
        const auto [gx, gw, gb] = customops::conv2d_backward(gy, x, w, g.s, g.p, g.d, groups, {true, true, true});
        const auto [ex, ew, eb] =
            at::convolution_backward(gy, x, w, std::vector<int64_t>{6}, g.s, g.p, g.d, false, {0, 0}, groups,
                                     {true, true, true});
        expect_close(gx, ex, "grad_input");
        expect_close(gw, ew, "grad_weight");
        expect_close(gb, eb, "grad_bias");
      }
    }
  }
}

TEST(Conv, BackwardComputesOnlyTheMaskedGradients) {
  const auto x = torch::randn({2, 3, 7, 7}, torch::kDouble);
  const auto w = torch::randn({3, 1, 3, 3}, torch::kDouble);
  const auto gy = torch::randn({2, 3, 5, 5}, torch::kDouble);
  const auto [gx, gw, gb] = customops::conv2d_backward(gy, x, w, {1, 1}, {0, 0}, {1, 1}, 3, {false, true, false});
  EXPECT_FALSE(gx.defined());
  EXPECT_TRUE(gw.defined());
  EXPECT_FALSE(gb.defined());
  const auto [dx, dw, db] = customops::depthwise_conv2d_backward(gy, x, w, {1, 1}, {0, 0}, {1, 1}, {true, false, true});
  EXPECT_TRUE(dx.defined());
  EXPECT_FALSE(dw.defined());
  EXPECT_TRUE(db.defined());
}

TEST(Conv, DepthwiseMatchesATenWithChannelMultiplier) {
  for (const auto& device : devices()) {
    const auto opts = torch::dtype(torch::kDouble).device(device);
    for (const auto& g : kGeometries) {
      for (const int64_t k : {1, 3, 7}) {
        const auto x = torch::randn({2, 3, 12, 10}, opts);
        const auto w = torch::randn({6, 1, k, k}, opts);  // m = 2
        const auto b = torch::randn({6}, opts);
        const auto y = customops::depthwise_conv2d(x, w, b, g.s, g.p, g.d);
        expect_close(y, at::conv2d(x, w, b, g.s, g.p, g.d, 3), "forward");

        const auto gy = torch::randn_like(y);
        const auto [gx, gw, gb] = customops::depthwise_conv2d_backward(gy, x, w, g.s, g.p, g.d, {true, true, true});
        const auto [ex, ew, eb] = at::convolution_backward(gy, x, w, std::vector<int64_t>{6}, g.s, g.p, g.d, false,
                                                           {0, 0}, 3, {true, true, true});
        expect_close(gx, ex, "grad_input");
        expect_close(gw, ew, "grad_weight");
        expect_close(gb, eb, "grad_bias");
      }
    }
  }
}

// The per-op choice of CUDA implementation, from C++: every policy gives PyTorch's values (on CUDA each runs
// its own kernels), and unknown ops and backends are refused by name.
TEST(Conv, DepthwiseBackendsFromCpp) {
  EXPECT_EQ(customops::backends::get("depthwise_conv2d"), "auto");
  for (const char* backend : {"customops", "pytorch", "auto"}) {
    customops::backends::set("depthwise_conv2d", backend);
    EXPECT_EQ(customops::backends::get("depthwise_conv2d"), backend);
    for (const auto& device : devices()) {
      const auto opts = torch::dtype(torch::kFloat).device(device);
      const auto x = torch::randn({2, 8, 9, 9}, opts).contiguous(at::MemoryFormat::ChannelsLast);
      const auto w = torch::randn({8, 1, 3, 3}, opts);
      const auto y = customops::depthwise_conv2d(x, w, std::nullopt, {2, 2}, {1, 1}, {1, 1});
      EXPECT_TRUE(torch::allclose(y, at::conv2d(x, w, {}, {2, 2}, {1, 1}, {1, 1}, 8), 1e-4, 1e-5)) << backend;
      EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast)) << backend;
    }
  }
  EXPECT_THROW(customops::backends::set("depthwise_conv2d", "cudnn"), c10::Error);
  EXPECT_THROW(customops::backends::get("quick_gelu"), c10::Error);
}

// A workspace of 1 MiB forces one image per chunk; results must not change.
TEST(Conv, Conv2dChunksTheBatchUnderTheWorkspaceLimit) {
  const auto x = torch::randn({5, 16, 40, 40}, torch::kDouble);
  const auto w = torch::randn({8, 16, 3, 3}, torch::kDouble);
  const auto expected = at::conv2d(x, w, {}, {1, 1}, {1, 1});
  ASSERT_GT(16 * 9 * 40 * 40 * 8, 1 << 20);  // one image's columns exceed the limit
  setenv("CUSTOMOPS_CONV2D_WORKSPACE_MIB", "1", 1);
  const auto y = customops::conv2d(x, w, {}, {1, 1}, {1, 1});
  const auto gy = torch::randn_like(y);
  const auto grads = customops::conv2d_backward(gy, x, w, {1, 1}, {1, 1}, {1, 1}, 1, {true, true, false});
  unsetenv("CUSTOMOPS_CONV2D_WORKSPACE_MIB");
  expect_close(y, expected, "forward");
  const auto ref = at::convolution_backward(gy, x, w, std::nullopt, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1,
                                            {true, true, false});
  expect_close(std::get<0>(grads), std::get<0>(ref), "grad_input");
  expect_close(std::get<1>(grads), std::get<1>(ref), "grad_weight");
}

} // namespace
