// Out variants (`<op>.out`, the result written into a given tensor) of ops whose programs are run by runtimes that
// plan their memory, ExecuTorch's: its lowering turns each op of a program into the op's out variant, which its
// runtime then runs with customops' kernels (kernels/executorch/). In PyTorch the out variant is the functional
// op, called through the dispatcher (so every backend's kernel), its result copied into `out` as ATen's out=
// functions do: resized when it is empty or of another size, refused when its dtype differs.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace customops::out_variant {

inline at::Tensor& into(const char* op, const at::Tensor& result, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "customops::", op, ": expected out of dtype ",
              result.scalar_type(), ", got ", out.scalar_type());
  TORCH_CHECK(out.device() == result.device(), "customops::", op, ": expected out on ", result.device(), ", got ",
              out.device());
  if (!out.sizes().equals(result.sizes())) out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

} // namespace customops::out_variant
