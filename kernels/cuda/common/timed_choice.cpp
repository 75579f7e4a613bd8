#include "kernels/cuda/common/timed_choice.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraphsUtils.cuh>
#include <ATen/cuda/Sleep.h>

namespace customops::cuda {
namespace {

// GPU milliseconds per run of each candidate.
//
// Both run once untimed first (allocations, cuDNN's own algorithm search). Then the candidates alternate over
// kRounds windows each, kRuns calls between two events, and each keeps its best window, so that a clock still
// rising from idle or another process's work weighs on both alike, not on whichever ran first. A sleep kernel
// queued before every window holds the GPU while the host queues the window's calls: on small planes the host
// takes longer to launch a call than the GPU to run it, and without it the events would time the host.
struct Times {
  float ours, theirs;
};

Times time_candidates(const std::function<void()>& ours, const std::function<void()>& theirs) {
  constexpr int kRounds = 3, kRuns = 4;
  // About 0.5 ms at Hopper's clocks: longer than the host takes to queue kRuns calls of either candidate.
  constexpr int64_t kSleepCycles = 1'000'000;
  ours();
  theirs();
  const std::array<const std::function<void()>*, 2> runs{&ours, &theirs};
  std::vector<at::cuda::CUDAEvent> marks;
  marks.reserve(4 * kRounds);
  const auto stream = at::cuda::getCurrentCUDAStream();
  for (int round = 0; round < kRounds; ++round) {
    for (int c = 0; c < 2; ++c) {
      at::cuda::sleep(kSleepCycles);
      marks.emplace_back(cudaEventDefault).record(stream);
      for (int i = 0; i < kRuns; ++i) (*runs[c])();
      marks.emplace_back(cudaEventDefault).record(stream);
    }
  }
  marks.back().synchronize();
  std::array<float, 2> best{std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
  for (size_t w = 0; w < marks.size() / 2; ++w) {
    auto& b = best[w % 2];
    b = std::min(b, marks[2 * w].elapsed_time(marks[2 * w + 1]) / kRuns);
  }
  return {best[0], best[1]};
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
  const Times t = time_candidates(ours, theirs);
  const auto impl = t.ours <= t.theirs ? backend::Impl::customops : backend::Impl::pytorch;
  backend::tuned().remember(k, impl);
  return impl;
}

}  // namespace customops::cuda
