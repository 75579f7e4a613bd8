// Loads an ExecuTorch program (.pte, from executorch.exir's to_executorch) whose ops run on customops' ExecuTorch
// kernels, ExecuTorch's CPU kernels and the XNNPACK delegate, runs its forward method, and reports the time per
// call. No libtorch: this is what an app on a device links.
//
//   customops_executorch_runner PROGRAM.pte --inputs INPUTS.bin [--output OUT.bin] [--repeats N]
//
// INPUTS.bin and OUT.bin hold tensors in customops.executorch's plain format (save_tensors / load_tensors): a
// count, then per tensor its dtype (ScalarType code), rank, sizes and contiguous data. The last line printed is
// JSON: {"median_ms": ..., "shapes": [[...], ...]}.
//
// customops' kernels register themselves with the runtime from static initialisers when libcustomops_executorch.so
// is loaded: linking it (with --no-as-needed, as its CMake target says) is all it takes; nothing here names a
// customops symbol. The same holds for ExecuTorch's kernels and delegate libraries.
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner_args.h"

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::EValue;

constexpr const char* kUsage =
    "usage: customops_executorch_runner PROGRAM.pte --inputs INPUTS.bin [--output OUT.bin] [--repeats N]";

struct Options {
  std::string program, inputs, output;
  int repeats = 20;
};

Options parse(int argc, char** argv) {
  const runner_args::Args a(argc, argv, {"--inputs", "--output", "--repeats"}, {"--inputs"}, kUsage);
  return {a.file(), a.get("--inputs"), a.get("--output"), a.count("--repeats", 20)};
}

void check(Error e, const std::string& what) {
  if (e != Error::Ok) {
    std::ostringstream m;
    m << what << " failed (ExecuTorch error 0x" << std::hex << static_cast<int>(e) << ")";
    throw std::runtime_error(m.str());
  }
}

size_t element_size(int32_t dtype) {
  switch (static_cast<ScalarType>(dtype)) {
    case ScalarType::Double:
    case ScalarType::Long: return 8;
    case ScalarType::Float:
    case ScalarType::Int: return 4;
    case ScalarType::Half:
    case ScalarType::BFloat16: return 2;
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char: return 1;
    default: throw std::runtime_error("unsupported dtype code " + std::to_string(dtype));
  }
}

// A tensor read from, or to be written to, the plain format, with the storage an ExecuTorch tensor views.
struct HostTensor {
  int32_t dtype = 0;
  std::vector<int64_t> sizes;
  std::vector<char> data;
  // What a TensorImpl points at: ExecuTorch's size, dim order and stride types.
  std::vector<executorch::aten::SizesType> et_sizes;
  std::vector<executorch::aten::DimOrderType> dim_order;
  std::vector<executorch::aten::StridesType> strides;
  std::unique_ptr<executorch::aten::TensorImpl> impl;

  int64_t numel() const { return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()); }

  Tensor view() {
    const size_t rank = sizes.size();
    et_sizes.assign(sizes.begin(), sizes.end());
    dim_order.resize(rank);
    strides.resize(rank);
    for (size_t d = 0; d < rank; ++d) dim_order[d] = static_cast<executorch::aten::DimOrderType>(d);
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      strides[d] = static_cast<executorch::aten::StridesType>(stride);
      stride *= sizes[d];
    }
    impl = std::make_unique<executorch::aten::TensorImpl>(static_cast<ScalarType>(dtype), rank, et_sizes.data(),
                                                          data.data(), dim_order.data(), strides.data());
    return Tensor(impl.get());
  }
};

template <typename T>
T read_value(std::istream& in, const std::string& path) {
  T v;
  if (!in.read(reinterpret_cast<char*>(&v), sizeof(T))) throw std::runtime_error(path + ": truncated");
  return v;
}

std::vector<HostTensor> load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<HostTensor> tensors(read_value<uint32_t>(in, path));
  for (HostTensor& t : tensors) {
    t.dtype = read_value<int32_t>(in, path);
    t.sizes.resize(read_value<int32_t>(in, path));
    for (int64_t& s : t.sizes) s = read_value<int64_t>(in, path);
    t.data.resize(t.numel() * element_size(t.dtype));
    if (!in.read(t.data.data(), static_cast<std::streamsize>(t.data.size()))) {
      throw std::runtime_error(path + ": truncated");
    }
  }
  return tensors;
}

void save_tensors(const std::string& path, const std::vector<Tensor>& tensors) {
  std::ofstream out(path, std::ios::binary);
  const uint32_t count = static_cast<uint32_t>(tensors.size());
  out.write(reinterpret_cast<const char*>(&count), sizeof count);
  for (const Tensor& t : tensors) {
    const int32_t dtype = static_cast<int32_t>(t.scalar_type()), rank = static_cast<int32_t>(t.dim());
    out.write(reinterpret_cast<const char*>(&dtype), sizeof dtype);
    out.write(reinterpret_cast<const char*>(&rank), sizeof rank);
    for (int32_t d = 0; d < rank; ++d) {
      const int64_t s = t.size(d);
      out.write(reinterpret_cast<const char*>(&s), sizeof s);
    }
    out.write(static_cast<const char*>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run(const Options& o) {
  executorch::runtime::runtime_init();
  auto loader = executorch::extension::FileDataLoader::from(o.program.c_str());
  check(loader.error(), "reading " + o.program);
  auto program = executorch::runtime::Program::load(&loader.get());
  check(program.error(), "loading the program " + o.program);
  auto meta = program->method_meta("forward");
  check(meta.error(), "finding the forward method");

  // The memory the program planned (its activations), then the method's own allocations.
  std::vector<std::vector<uint8_t>> planned(meta->num_memory_planned_buffers());
  std::vector<executorch::runtime::Span<uint8_t>> spans;
  for (size_t i = 0; i < planned.size(); ++i) {
    planned[i].resize(static_cast<size_t>(meta->memory_planned_buffer_size(i).get()));
    spans.emplace_back(planned[i].data(), planned[i].size());
  }
  executorch::runtime::HierarchicalAllocator planned_memory({spans.data(), spans.size()});
  executorch::extension::MallocMemoryAllocator method_allocator, temp_allocator;
  executorch::runtime::MemoryManager memory(&method_allocator, &planned_memory, &temp_allocator);
  auto method = program->load_method("forward", &memory);
  check(method.error(), "loading the forward method (a kernel missing from this app?)");

  std::vector<HostTensor> inputs = load_tensors(o.inputs);
  if (inputs.size() != method->inputs_size()) {
    throw std::runtime_error("the program takes " + std::to_string(method->inputs_size()) + " inputs, " + o.inputs +
                             " holds " + std::to_string(inputs.size()));
  }
  std::vector<double> times;
  for (int r = 0; r < o.repeats; ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) check(method->set_input(EValue(inputs[i].view()), i), "an input");
    const auto start = std::chrono::steady_clock::now();
    check(method->execute(), "running the program");
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < method->outputs_size(); ++i) {
    const EValue& v = method->get_output(i);
    if (!v.isTensor()) throw std::runtime_error("output " + std::to_string(i) + " is not a tensor");
    outputs.push_back(v.toTensor());
  }
  if (!o.output.empty()) save_tensors(o.output, outputs);

  std::sort(times.begin(), times.end());
  std::cout << "{\"median_ms\": " << times[times.size() / 2] << ", \"shapes\": [";
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << (i ? ", [" : "[");
    for (ssize_t d = 0; d < outputs[i].dim(); ++d) std::cout << (d ? ", " : "") << outputs[i].size(d);
    std::cout << "]";
  }
  std::cout << "]}" << std::endl;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "customops_executorch_runner: " << e.what() << std::endl;
    return 1;
  }
}
