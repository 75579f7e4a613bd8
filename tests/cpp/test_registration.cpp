// Every operator in the customops namespace, found through the dispatcher (no
// hand-kept list), must have the kernels and tags the project promises.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

// The umbrella header, in this one test: that it compiles (every op's header, written into it by CMake). The
// other tests include their families' headers, so that a new op's header recompiles this file alone.
#include <customops/ops.h>

#include <string>
#include <vector>

namespace {

// The operators (overload ""), or their out variants (overload "out": what ExecuTorch's programs call).
std::vector<c10::OperatorHandle> customops_ops(const std::string& overload = "") {
  std::vector<c10::OperatorHandle> ops;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("customops::", 0) == 0 && name.overload_name == overload) {
      ops.push_back(*dispatcher.findOp(name));
    }
  }
  return ops;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(Registration, LibraryRegistersOperators) {
  EXPECT_GE(customops_ops().size(), 2u);
}

TEST(Registration, EveryOpHasEveryBackendKernel) {
  for (const auto& op : customops_ops()) {
    const auto name = op.operator_name().name;
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) << name << " has no CPU kernel";
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) << name << " has no Meta kernel";
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::Autograd)) << name << " has no Autograd kernel";
#if defined(CUSTOMOPS_WITH_CUDA)
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::CUDA)) << name << " has no CUDA kernel";
#endif
    EXPECT_TRUE(op.hasTag(at::Tag::pt2_compliant_tag)) << name << " lacks the pt2_compliant tag";
  }
}

// An out variant is its op through the dispatcher, copied into `out`: one kernel for every key.
TEST(Registration, EveryOutVariantHasItsOpAndOneKernel) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& op : customops_ops("out")) {
    const auto name = op.operator_name().name;
    EXPECT_TRUE(dispatcher.findOp({name, ""}).has_value()) << name << ".out has no op";
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
        << name << ".out has no CompositeExplicitAutograd kernel";
  }
}

TEST(Registration, EveryForwardOpHasARegisteredBackwardOp) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& op : customops_ops()) {
    const auto name = op.operator_name().name;
    if (ends_with(name, "_backward")) {
      const auto forward = name.substr(0, name.size() - std::string("_backward").size());
      EXPECT_TRUE(dispatcher.findOp({forward, ""}).has_value()) << name << " has no forward op";
    } else {
      EXPECT_TRUE(dispatcher.findOp({name + "_backward", ""}).has_value()) << name << " has no backward op";
    }
  }
}

} // namespace
