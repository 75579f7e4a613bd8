// The decision behind the CUDA kernels' device check (kernels/common/cuda_arch.h), on made-up GPUs: a machine
// here may have none, and the cases that fail (an old GPU, an old driver) are the ones no test machine has.
#include <gtest/gtest.h>

#include "kernels/common/cuda_arch.h"

namespace ca = customops::cuda_arch;

namespace {

const ca::Build kWide{{80, 86, 89, 90, 100, 120}, {120}, 13020};

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(CudaArch, MachineCodeRunsOnItsArchitectureAndNewerMinors) {
  EXPECT_EQ(ca::problem(kWide, {90, 13020, "H100"}), "");
  EXPECT_EQ(ca::problem(kWide, {87, 13000, "Orin"}), "");  // sm_86 code on 8.7, no PTX needed
  const ca::Build ampere{{80}, {}, 13020};
  EXPECT_EQ(ca::problem(ampere, {86, 13000, "A10"}), "");
  EXPECT_NE(ca::problem(ampere, {90, 13020, "H100"}), "");  // not across majors
}

TEST(CudaArch, AnOlderGpuIsRefusedWithTheRebuildCommand) {
  const std::string why = ca::problem(kWide, {75, 13020, "Tesla T4"});
  EXPECT_TRUE(mentions(why, "Tesla T4 (sm_75)")) << why;
  EXPECT_TRUE(mentions(why, "sm_80, sm_86, sm_89, sm_90, sm_100, sm_120")) << why;
  EXPECT_TRUE(mentions(why, "TORCH_CUDA_ARCH_LIST=7.5")) << why;
  EXPECT_TRUE(mentions(why, "customops.build_info()")) << why;
}

TEST(CudaArch, ANewerGpuRunsThePtxWhenTheDriverCanCompileIt) {
  const ca::Build hopper{{90}, {90}, 13020};
  EXPECT_EQ(ca::problem(hopper, {120, 13020, "RTX 5090"}), "");
  const std::string why = ca::problem(hopper, {120, 13000, "RTX 5090"});
  EXPECT_TRUE(mentions(why, "through PTX")) << why;
  EXPECT_TRUE(mentions(why, "driver (CUDA 13.0)")) << why;
  EXPECT_TRUE(mentions(why, "CUDA 13.2")) << why;
  EXPECT_TRUE(mentions(why, "TORCH_CUDA_ARCH_LIST=12.0")) << why;
  // PTX never runs on an older architecture than its own.
  EXPECT_NE(ca::problem(hopper, {89, 13020, "L4"}), "");
}

TEST(CudaArch, ADriverOfAnOlderCudaMajorIsRefused) {
  const std::string why = ca::problem(kWide, {90, 12080, "H100"});
  EXPECT_TRUE(mentions(why, "driver supports CUDA 12.8")) << why;
  EXPECT_TRUE(mentions(why, "CUDA 13.x or newer")) << why;
}

TEST(CudaArch, ParsesTheBuildsLists) {
  EXPECT_EQ(ca::parse("80,86,120"), (std::vector<int>{80, 86, 120}));
  EXPECT_TRUE(ca::parse("").empty());
  EXPECT_EQ(ca::describe({}, "compute_"), "none");
}
