// Loads a TorchScript model that calls customops operators, runs it from C++,
// and reports the time per call.
//
//   customops_torchscript MODEL.pt [--device cpu|cuda] [--repeats N] [--threads T] [--output OUT.pt]
//
// The model's forward is called with the tensors in its `example_inputs`
// attribute (a List[Tensor], moved to the device). The output is written with
// torch::pickle_save, which Python reads with torch.load. The last line printed
// is JSON: {"device": ..., "median_ms": ..., "shape": [...], "threads": T,
// "mismatches": M, "max_abs_diff": D}. With --threads T > 1 the timed calls run
// in T threads at once, each calling the one module `repeats` times (as a
// server's request threads do); M counts the outputs that differ, bit for bit,
// from the warm-up call's, and D is the largest difference.
//
// Nothing here names a customops symbol: linking customops::customops is what
// registers the operators the model calls.
#include <torch/script.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/cuda.h>

#include "runner_args.h"

namespace {

struct Options {
  std::string model;
  std::string device = "cpu";
  std::string output;
  int repeats = 20;
  int threads = 1;
};

constexpr const char* kUsage =
    "usage: customops_torchscript MODEL.pt [--device cpu|cuda] [--repeats N] [--threads T] [--output OUT.pt]";

Options parse(int argc, char** argv) {
  const runner_args::Args a(argc, argv, {"--device", "--repeats", "--output", "--threads"}, {}, kUsage);
  return {a.file(), a.get("--device", "cpu"), a.get("--output"), a.count("--repeats", 20), a.count("--threads", 1)};
}

void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
}

} // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  const torch::Device device(opt.device);
  torch::jit::Module model = torch::jit::load(opt.model, device);
  model.eval();

  std::vector<torch::jit::IValue> inputs;
  for (const auto& t : model.attr("example_inputs").toTensorList()) {
    inputs.emplace_back(at::Tensor(t).to(device));
  }

  torch::NoGradGuard no_grad;
  torch::Tensor out = model.forward(inputs).toTensor();  // warm-up
  std::vector<double> ms;
  std::atomic<int> mismatches{0};
  std::mutex diff_mutex;  // guards max_abs_diff and error
  double max_abs_diff = 0;
  std::string error;
  if (opt.threads == 1) {
    for (int r = 0; r < opt.repeats; ++r) {
      sync(device);
      const auto t0 = std::chrono::steady_clock::now();
      out = model.forward(inputs).toTensor();
      sync(device);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  } else {
    // The calls of all threads on the device's current stream: the device orders them, the host runs them at
    // once (the dispatcher, the interpreter, the kernels' host code and any state they share).
    const torch::Tensor expected = out;
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < opt.threads; ++t) {
      pool.emplace_back([&] {
        try {
          torch::NoGradGuard no_grad_here;  // grad mode is per thread
          for (int r = 0; r < opt.repeats; ++r) {
            const torch::Tensor got = model.forward(inputs).toTensor();
            if (torch::equal(got, expected)) continue;
            ++mismatches;
            const double diff = (got.to(torch::kDouble) - expected.to(torch::kDouble)).abs().max().item<double>();
            const std::lock_guard<std::mutex> lock(diff_mutex);
            max_abs_diff = std::max(max_abs_diff, diff);
          }
        } catch (const std::exception& e) {  // an exception leaving a thread would terminate the process
          const std::lock_guard<std::mutex> lock(diff_mutex);
          if (error.empty()) error = e.what();
        }
      });
    }
    for (auto& th : pool) th.join();
    if (!error.empty()) throw std::runtime_error("a thread's call failed: " + error);
    sync(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                 (opt.threads * opt.repeats));
  }
  std::sort(ms.begin(), ms.end());

  if (!opt.output.empty()) {
    const auto bytes = torch::pickle_save(out.to(torch::kCPU));
    std::ofstream(opt.output, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::cout << "{\"device\": \"" << device << "\", \"median_ms\": " << ms[ms.size() / 2] << ", \"shape\": [";
  for (size_t i = 0; i < out.sizes().size(); ++i) std::cout << (i ? ", " : "") << out.size(static_cast<int64_t>(i));
  std::cout << "], \"threads\": " << opt.threads << ", \"mismatches\": " << mismatches.load()
            << ", \"max_abs_diff\": " << max_abs_diff << "}" << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "customops_torchscript: " << e.what() << std::endl;
  return 1;
}
