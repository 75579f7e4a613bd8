// Loads a TorchScript model that calls customops operators, runs it from C++,
// and reports the time per call.
//
//   customops_torchscript MODEL.pt [--device cpu|cuda] [--repeats N] [--output OUT.pt]
//
// The model's forward is called with the tensors in its `example_inputs`
// attribute (a List[Tensor], moved to the device). The output is written with
// torch::pickle_save, which Python reads with torch.load. The last line printed
// is JSON: {"device": ..., "median_ms": ..., "shape": [...]}.
//
// Nothing here names a customops symbol: linking customops::customops is what
// registers the operators the model calls.
#include <torch/script.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <torch/cuda.h>

namespace {

struct Options {
  std::string model;
  std::string device = "cpu";
  std::string output;
  int repeats = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--device") o.device = value();
    else if (a == "--repeats") o.repeats = std::stoi(value());
    else if (a == "--output") o.output = value();
    else if (o.model.empty()) o.model = a;
    else throw std::runtime_error("unexpected argument " + a);
  }
  if (o.model.empty()) throw std::runtime_error("usage: customops_torchscript MODEL.pt [--device cpu|cuda] [--repeats N] [--output OUT.pt]");
  if (o.repeats < 1) throw std::runtime_error("--repeats must be at least 1");
  return o;
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
  for (int r = 0; r < opt.repeats; ++r) {
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    out = model.forward(inputs).toTensor();
    sync(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());

  if (!opt.output.empty()) {
    const auto bytes = torch::pickle_save(out.to(torch::kCPU));
    std::ofstream(opt.output, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::cout << "{\"device\": \"" << device << "\", \"median_ms\": " << ms[ms.size() / 2] << ", \"shape\": [";
  for (size_t i = 0; i < out.sizes().size(); ++i) std::cout << (i ? ", " : "") << out.size(static_cast<int64_t>(i));
  std::cout << "]}" << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "customops_torchscript: " << e.what() << std::endl;
  return 1;
}
