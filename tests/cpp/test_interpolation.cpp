// upsample_bilinear2d and trilinear_interpolation through the C++ API, against
// ATen's own resize and a plain-ATen trilinear formula.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/autograd.h>
#include <torch/types.h>

#include <customops/trilinear.h>
#include <customops/upsample.h>

#include <vector>

namespace {

std::vector<c10::Device> devices() {
  std::vector<c10::Device> out{c10::kCPU};
  if (torch::cuda::is_available()) out.emplace_back(c10::kCUDA);
  return out;
}

TEST(Upsample, MatchesATenConventions) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{5, 7}, {10, 14}}, {{9, 11}, {4, 5}}, {{3, 4}, {29, 23}}, {{6, 5}, {6, 5}}};
  for (const auto& device : devices()) {
    for (const auto& [in, out] : cases) {
      for (const bool align : {false, true}) {
        const auto x = torch::randn({2, 3, in[0], in[1]}, torch::dtype(torch::kDouble).device(device))
                           .requires_grad_(true);
        const auto y = customops::upsample_bilinear2d(x, out, align ? "align_corners" : "half_pixel");
        const auto expected = at::upsample_bilinear2d(x, out, align);
        EXPECT_TRUE(at::allclose(y, expected, 1e-12, 1e-12));
        const auto g = torch::randn_like(expected);
        const auto grad = torch::autograd::grad({y}, {x}, {g})[0];
        const auto expected_grad = torch::autograd::grad({expected}, {x}, {g})[0];
        EXPECT_TRUE(at::allclose(grad, expected_grad, 1e-12, 1e-12));
        EXPECT_TRUE(at::allclose(customops::upsample_bilinear2d_backward(g, in, align ? "align_corners" : "half_pixel"),
                                 expected_grad, 1e-12, 1e-12));
      }
    }
  }
}

// asymmetric samples src = o * in/out: by 2, even outputs copy input pixels
// and odd ones average two neighbours (the last repeats the edge).
TEST(Upsample, AsymmetricDoublingCopiesAndAverages) {
  for (const auto& device : devices()) {
    const auto x = torch::randn({1, 2, 4, 5}, torch::dtype(torch::kDouble).device(device));
    const auto y = customops::upsample_bilinear2d(x, {8, 10}, "asymmetric");
    using torch::indexing::None;
    using torch::indexing::Slice;
    const auto even = y.index({Slice(), Slice(), Slice(0, None, 2), Slice(0, None, 2)});
    EXPECT_TRUE(at::allclose(even, x, 1e-12, 1e-12));
    const auto row1 = y.index({Slice(), Slice(), Slice(0, None, 2), Slice(1, 9, 2)});
    const auto mean = (x.index({Slice(), Slice(), Slice(), Slice(0, 4)}) + x.index({Slice(), Slice(), Slice(), Slice(1, 5)})) / 2;
    EXPECT_TRUE(at::allclose(row1, mean, 1e-12, 1e-12));
    EXPECT_TRUE(at::allclose(y.index({Slice(), Slice(), Slice(0, None, 2), 9}), x.index({Slice(), Slice(), Slice(), 4}),
                             1e-12, 1e-12));
  }
}

TEST(Upsample, BadArgumentsRaise) {
  const auto x = torch::randn({1, 2, 5, 5});
  EXPECT_THROW(customops::upsample_bilinear2d(x, {4, 4}, "nearest"), c10::Error);
  EXPECT_THROW(customops::upsample_bilinear2d(x, {0, 4}), c10::Error);
  EXPECT_THROW(customops::upsample_bilinear2d(x[0], {4, 4}), c10::Error);
  EXPECT_THROW(customops::upsample_bilinear2d(x.to(torch::kLong), {4, 4}), c10::Error);
}

at::Tensor trilinear_reference(const at::Tensor& feats, const at::Tensor& points) {
  const auto t = (points + 1) / 2;
  const auto u = t.select(1, 0).unsqueeze(1), v = t.select(1, 1).unsqueeze(1), w = t.select(1, 2).unsqueeze(1);
  const auto a = (1 - v) * (1 - w), b = (1 - v) * w, c = v * (1 - w), d = v * w;
  auto f = [&](int k) { return feats.select(1, k); };
  return (1 - u) * (a * f(0) + b * f(1) + c * f(2) + d * f(3)) + u * (a * f(4) + b * f(5) + c * f(6) + d * f(7));
}

TEST(Trilinear, MatchesFormulaAndItsGradients) {
  for (const auto& device : devices()) {
    for (const int64_t F : {1, 7, 64}) {
      const auto opts = torch::dtype(torch::kDouble).device(device);
      const auto feats = torch::randn({33, 8, F}, opts).requires_grad_(true);
      const auto points = (torch::rand({33, 3}, opts) * 2.4 - 1.2).requires_grad_(true);
      const auto out = customops::trilinear_interpolation(feats, points);
      const auto expected = trilinear_reference(feats, points);
      EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12));
      const auto g = torch::randn_like(out);
      const auto grads = torch::autograd::grad({out}, {feats, points}, {g});
      const auto expected_grads = torch::autograd::grad({expected}, {feats, points}, {g});
      EXPECT_TRUE(at::allclose(grads[0], expected_grads[0], 1e-12, 1e-12));
      EXPECT_TRUE(at::allclose(grads[1], expected_grads[1], 1e-10, 1e-10));
      const auto [gf, gp] = customops::trilinear_interpolation_backward(g, feats, points, {false, true});
      EXPECT_FALSE(gf.defined());
      EXPECT_TRUE(at::allclose(gp, expected_grads[1], 1e-10, 1e-10));
    }
  }
}

TEST(Trilinear, BadArgumentsRaise) {
  const auto feats = torch::randn({4, 8, 3});
  EXPECT_THROW(customops::trilinear_interpolation(feats.narrow(1, 0, 7), torch::rand({4, 3})), c10::Error);
  EXPECT_THROW(customops::trilinear_interpolation(feats, torch::rand({4, 2})), c10::Error);
  EXPECT_THROW(customops::trilinear_interpolation(feats, torch::rand({5, 3})), c10::Error);
  EXPECT_THROW(customops::trilinear_interpolation(feats, torch::ones({4, 3}, torch::kInt)), c10::Error);
}

} // namespace
