#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace customops::detail {

// The typed handle of a registered operator, looked up once per call site (a function-local static; in the
// headers of the pointwise ops, whose C++ API is inline, once per library or program that calls it).
template <typename Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* qualified_name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified_name, "").typed<Signature>();
}

} // namespace customops::detail
