// Which implementation a CUDA op runs where PyTorch has a competing kernel: customops' own, or PyTorch's
// (cuDNN or native). Per op a policy: "auto" (default) picks per call by a rule measured on the zoo's shapes,
// or, while torch.backends.cudnn.benchmark is on, by timing both once per shape (as cuDNN's benchmark mode
// does, and cached for the process); "customops" and "pytorch" force one. Plain C++: the CUDA kernels consult
// it, the C++ tests drive it, and the customops_backends ops expose it to Python and TorchScript.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace customops::backend {

enum class Impl : uint8_t { customops, pytorch };
enum class Policy : uint8_t { automatic, customops, pytorch };

const char* name(Impl impl);  // "customops" / "pytorch"

// The ops with a choice: "depthwise_conv2d", "upsample_bilinear2d".
const std::vector<std::string>& ops_with_choice();

// Policy of `op` by name ("auto", "customops", "pytorch"); both refuse unknown ops and policies.
void set_policy(const std::string& op, const std::string& policy);
std::string policy_name(const std::string& op);
Policy policy(const std::string& op);

// Choices measured at run time (benchmark mode), keyed by op and shape; process-wide, thread-safe.
class TunedChoices {
 public:
  std::optional<Impl> find(const std::string& key) const;
  void remember(const std::string& key, Impl impl);
  void clear();
  std::vector<std::string> entries() const;  // "key=impl", sorted

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Impl> choices_;
};
TunedChoices& tuned();

}  // namespace customops::backend
