#include "kernels/cuda/common/timed_choice.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraphsUtils.cuh>

namespace customops::cuda {
namespace {

// Milliseconds per run, after one untimed run (allocations, cuDNN's own algorithm search).
float time_ms(const std::function<void()>& run) {
  constexpr int kRuns = 3;
  run();
  at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
  const auto stream = at::cuda::getCurrentCUDAStream();
  start.record(stream);
  for (int i = 0; i < kRuns; ++i) run();
  end.record(stream);
  end.synchronize();
  return start.elapsed_time(end) / kRuns;
}

}  // namespace

bool may_time_choice() {
  const auto& ctx = at::globalContext();
  return ctx.benchmarkCuDNN() && !ctx.deterministicAlgorithms() &&
         at::cuda::currentStreamCaptureStatus() == at::cuda::CaptureStatus::None;
}

backend::Impl choose(const std::string& op, bool has_choice, backend::Impl rule,
                     const std::function<std::string()>& key, const std::function<void()>& ours,
                     const std::function<void()>& theirs) {
  switch (backend::policy(op)) {
    case backend::Policy::customops: return backend::Impl::customops;
    case backend::Policy::pytorch: return has_choice ? backend::Impl::pytorch : backend::Impl::customops;
    default: break;
  }
  if (!has_choice) return backend::Impl::customops;
  if (!may_time_choice()) return rule;
  const std::string k = key();
  if (auto known = backend::tuned().find(k)) return *known;
  const float mine = time_ms(ours), other = time_ms(theirs);
  const auto impl = mine <= other ? backend::Impl::customops : backend::Impl::pytorch;
  backend::tuned().remember(k, impl);
  return impl;
}

}  // namespace customops::cuda
