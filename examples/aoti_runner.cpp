// Loads an AOTInductor package (.pt2, from torch._inductor.aoti_compile_and_package
// or customops.aoti.compile_package) whose model calls customops operators, runs it
// from C++, and reports the time per call.
//
//   customops_aoti PACKAGE.pt2 --inputs INPUTS.pt [--device cpu|cuda] [--repeats N] [--output OUT.pt]
//
// INPUTS.pt is a list of tensors written by Python's torch.save; they are moved to
// the device and passed to the model in order. The outputs are written as a tuple
// with torch::pickle_save, which Python reads with torch.load. The last line
// printed is JSON: {"device": ..., "median_ms": ..., "shapes": [[...], ...]}.
//
// The package's compiled code calls customops operators by name through the
// dispatcher (torch's proxy executor), so they must be registered in this
// process: linking customops::customops (with --no-as-needed) does that, as for
// the TorchScript runner. Nothing here names a customops symbol.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "runner_args.h"

namespace {

struct Options {
  std::string package;
  std::string inputs;
  std::string device = "cpu";
  std::string output;
  int repeats = 20;
};

constexpr const char* kUsage =
    "usage: customops_aoti PACKAGE.pt2 --inputs INPUTS.pt [--device cpu|cuda] [--repeats N] [--output OUT.pt]";

Options parse(int argc, char** argv) {
  const runner_args::Args a(argc, argv, {"--inputs", "--device", "--repeats", "--output"}, {"--inputs"}, kUsage);
  return {a.file(), a.get("--inputs"), a.get("--device", "cpu"), a.get("--output"), a.count("--repeats", 20)};
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<at::Tensor> load_inputs(const std::string& path, const torch::Device& device) {
  const c10::IValue value = torch::pickle_load(read_file(path));
  if (!value.isList()) throw std::runtime_error(path + ": expected a list of tensors (torch.save([t, ...]))");
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : value.toListRef()) {
    if (!v.isTensor()) throw std::runtime_error(path + ": expected a list of tensors, found a " + v.tagKind());
    tensors.push_back(v.toTensor().to(device));
  }
  return tensors;
}

void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
}

} // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  const torch::Device device(opt.device);

  // A package holds code compiled for one device type; running it on another fails
  // deep inside the generated code, so say so plainly first.
  const auto metadata =
      torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(opt.package, "model");
  const auto compiled_for = metadata.find("AOTI_DEVICE_KEY");
  if (compiled_for != metadata.end() && compiled_for->second != c10::DeviceTypeName(device.type(), true)) {
    throw std::runtime_error(opt.package + " was compiled for " + compiled_for->second + ", not for --device " +
                             opt.device + "; compile it again on that device");
  }
  torch::inductor::AOTIModelPackageLoader model(opt.package, "model", false, 1, device.index());
  const std::vector<at::Tensor> inputs = load_inputs(opt.inputs, device);

  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> out = model.run(inputs);  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < opt.repeats; ++r) {
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    out = model.run(inputs);
    sync(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());

  if (!opt.output.empty()) {
    // A tuple: torch.load's default weights_only mode accepts it (a list pickles
    // with a TorchScript type tag, which that mode refuses).
    std::vector<c10::IValue> cpu;
    for (const at::Tensor& t : out) cpu.emplace_back(t.to(torch::kCPU));
    const auto bytes = torch::pickle_save(c10::ivalue::Tuple::create(std::move(cpu)));
    std::ofstream(opt.output, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::cout << "{\"device\": \"" << device << "\", \"median_ms\": " << ms[ms.size() / 2] << ", \"shapes\": [";
  for (size_t o = 0; o < out.size(); ++o) {
    std::cout << (o ? ", " : "") << "[";
    for (int64_t d = 0; d < out[o].dim(); ++d) std::cout << (d ? ", " : "") << out[o].size(d);
    std::cout << "]";
  }
  std::cout << "]}" << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "customops_aoti: " << e.what() << std::endl;
  return 1;
}
