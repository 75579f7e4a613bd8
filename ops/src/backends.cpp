#include <customops/backends.h>

#include <customops/detail/find_op.h>

namespace customops::backends {

void set(const std::string& op, const std::string& backend) {
  static const auto handle = detail::find_op<void(std::string, std::string)>("customops_backends::set");
  handle.call(op, backend);
}

std::string get(const std::string& op) {
  static const auto handle = detail::find_op<std::string(std::string)>("customops_backends::get");
  return handle.call(op);
}

}  // namespace customops::backends
