// The C++ API against a plain ATen reference, on CPU and (when present) CUDA.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/autograd.h>
#include <torch/types.h>

#include <customops/quick_gelu.h>

#include <vector>

namespace {

at::Tensor reference_forward(const at::Tensor& x) {
  const auto xd = x.to(at::kDouble);
  return xd * at::sigmoid(1.702 * xd);
}

std::vector<c10::Device> devices() {
  std::vector<c10::Device> out{c10::kCPU};
  if (torch::cuda::is_available()) {
    out.emplace_back(c10::kCUDA);
  }
  return out;
}

struct DtypeTolerance {
  at::ScalarType dtype;
  double rtol;
  double atol;
};

const std::vector<DtypeTolerance> kDtypes = {
    {at::kFloat, 1e-5, 1e-6},
    {at::kDouble, 1e-12, 1e-12},
    {at::kHalf, 1e-3, 1e-3},
    {at::kBFloat16, 8e-3, 8e-3},
};

void expect_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.to(at::kCPU, at::kDouble);
  const auto e = expected.to(at::kCPU, at::kDouble);
  EXPECT_TRUE(at::allclose(a, e, rtol, atol)) << "max abs error " << (a - e).abs().max().item<double>();
}

TEST(QuickGelu, MatchesReferenceForEveryDtypeAndDevice) {
  for (const auto& device : devices()) {
    for (const auto& [dtype, rtol, atol] : kDtypes) {
      const auto x = (torch::randn({1037, 3}, torch::kDouble) * 4).to(device, dtype);
      const auto y = customops::quick_gelu(x);
      EXPECT_EQ(y.scalar_type(), dtype);
      EXPECT_EQ(y.device().type(), device.type());
      // The reference sees the same rounded input the kernel saw.
      expect_close(y, reference_forward(x), rtol, atol);
    }
  }
}

TEST(QuickGelu, BackwardMatchesAutogradOfReference) {
  for (const auto& device : devices()) {
    const auto x = torch::randn({513, 7}, torch::dtype(torch::kDouble).device(device)) * 5;
    const auto g = torch::randn_like(x);
    const auto xr = x.clone().requires_grad_(true);
    const auto yr = xr * torch::sigmoid(1.702 * xr);
    const auto expected = torch::autograd::grad({yr}, {xr}, {g})[0];
    expect_close(customops::quick_gelu_backward(g, x), expected, 1e-10, 1e-12);

    const auto xa = x.clone().requires_grad_(true);
    customops::quick_gelu(xa).backward(g);
    expect_close(xa.grad(), expected, 1e-10, 1e-12);
  }
}

TEST(QuickGelu, NonContiguousAndEmptyInputs) {
  for (const auto& device : devices()) {
    const auto base = torch::randn({64, 33}, torch::dtype(torch::kFloat).device(device));
    for (const auto& x : {base.t(), base.slice(1, 1, 32, 2), base.narrow(0, 1, 50), base.slice(0, 0, 0)}) {
      const auto y = customops::quick_gelu(x);
      expect_close(y, reference_forward(x), 1e-5, 1e-6);
      const auto g = torch::randn_like(x);
      const auto xr = x.to(at::kDouble).requires_grad_(true);
      const auto expected = torch::autograd::grad({xr * torch::sigmoid(1.702 * xr)}, {xr}, {g.to(at::kDouble)},
                                                  /*retain_graph=*/c10::nullopt, /*create_graph=*/false,
                                                  /*allow_unused=*/true)[0];
      if (x.numel() > 0) {
        expect_close(customops::quick_gelu_backward(g, x), expected, 1e-5, 1e-6);
      } else {
        EXPECT_EQ(customops::quick_gelu_backward(g, x).numel(), 0);
      }
    }
  }
}

TEST(QuickGelu, LargeMagnitudesStayFinite) {
  for (const auto& device : devices()) {
    for (const auto& [dtype, rtol, atol] : kDtypes) {
      const auto x = torch::tensor({-60000.0, -1000.0, -100.0, -60.0, 60.0, 100.0, 1000.0, 60000.0})
                         .to(device, dtype);
      const auto y = customops::quick_gelu(x);
      const auto dy = customops::quick_gelu_backward(torch::ones_like(x), x);
      EXPECT_TRUE(torch::isfinite(y).all().item<bool>()) << y;
      EXPECT_TRUE(torch::isfinite(dy).all().item<bool>()) << dy;
      // Far from zero, quick_gelu is x for positive and 0 for negative inputs.
      const auto expected = torch::where(x > 0, x, torch::zeros_like(x));
      expect_close(y, expected, 1e-6, 1e-6);
      expect_close(dy, (x > 0).to(dtype), 1e-6, 1e-6);
    }
  }
}

TEST(QuickGelu, BadInputsRaiseNamingTheArgument) {
  const auto x = torch::randn({4, 4});
  EXPECT_THROW(
      {
        try {
          customops::quick_gelu(torch::ones({3}, torch::kLong));
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("expected x to be a floating-point tensor"), std::string::npos);
          throw;
        }
      },
      c10::Error);
  EXPECT_THROW(
      {
        try {
          customops::quick_gelu_backward(torch::randn({4, 3}), x);
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("expected grad_out to have the shape of x"), std::string::npos);
          throw;
        }
      },
      c10::Error);
  EXPECT_THROW(customops::quick_gelu_backward(x.to(at::kDouble), x), c10::Error);
  if (torch::cuda::is_available()) {
    EXPECT_THROW(
        {
          try {
            customops::quick_gelu_backward(x, x.cuda());
          } catch (const c10::Error& e) {
            EXPECT_NE(std::string(e.what()).find("expected grad_out and x on the same device"), std::string::npos);
            throw;
          }
        },
        c10::Error);
  }
}

} // namespace
