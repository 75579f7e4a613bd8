#include "kernels/common/backend_choice.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <map>

namespace customops::backend {
namespace {

std::map<std::string, std::atomic<Policy>>& policies() {
  static auto* table = [] {
    auto* t = new std::map<std::string, std::atomic<Policy>>;
    for (const auto& op : ops_with_choice()) (*t)[op].store(Policy::automatic);
    return t;
  }();
  return *table;
}

std::atomic<Policy>& entry(const std::string& op) {
  auto& table = policies();
  auto it = table.find(op);
  if (it == table.end()) {
    std::string known;
    for (const auto& o : ops_with_choice()) known += (known.empty() ? "" : ", ") + o;
    TORCH_CHECK(false, "customops.backends: no choice of implementation for op '", op, "'; ops with one: ", known);
  }
  return it->second;
}

}  // namespace

const char* name(Impl impl) {
  return impl == Impl::customops ? "customops" : "pytorch";
}

const std::vector<std::string>& ops_with_choice() {
  static const std::vector<std::string> ops{"depthwise_conv2d", "upsample_bilinear2d"};
  return ops;
}

void set_policy(const std::string& op, const std::string& policy) {
  auto& e = entry(op);
  if (policy == "auto") {
    e.store(Policy::automatic);
  } else if (policy == "customops") {
    e.store(Policy::customops);
  } else if (policy == "pytorch") {
    e.store(Policy::pytorch);
  } else {
    TORCH_CHECK(false, "customops.backends: expected the backend of '", op,
                "' to be 'auto', 'customops' or 'pytorch', got '", policy, "'");
  }
}

Policy policy(const std::string& op) {
  return entry(op).load(std::memory_order_relaxed);
}

std::string policy_name(const std::string& op) {
  switch (policy(op)) {
    case Policy::customops: return "customops";
    case Policy::pytorch: return "pytorch";
    default: return "auto";
  }
}

std::optional<Impl> TunedChoices::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

void TunedChoices::remember(const std::string& key, Impl impl) {
  std::lock_guard<std::mutex> lock(mutex_);
  choices_[key] = impl;
}

void TunedChoices::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  choices_.clear();
}

std::vector<std::string> TunedChoices::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [key, impl] : choices_) out.push_back(key + "=" + name(impl));
  std::sort(out.begin(), out.end());
  return out;
}

TunedChoices& tuned() {
  static TunedChoices* t = new TunedChoices;
  return *t;
}

}  // namespace customops::backend
