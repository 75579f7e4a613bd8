// conv2d's implicit-GEMM entry points in a build without the sm_90a kernels (no CUTLASS headers, or no 9.0 in
// TORCH_CUDA_ARCH_LIST, e.g. a build for Ampere alone): supports() refuses every call with kNotBuilt there, so
// these are never reached, but conv2d.cu calls them and the library must still link.
#include "kernels/cuda/conv2d/implicit.h"

#ifndef CUSTOMOPS_WITH_SM90_CONV
namespace customops::cuda::implicit_gemm {

Refusal forward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const Geometry&) {
  return Refusal::kNotBuilt;
}

Refusal input_grad(const at::Tensor&, const at::Tensor&, const at::Tensor&, const Geometry&) {
  return Refusal::kNotBuilt;
}

Refusal weight_grad(const void*, const void*, float*, const Geometry&, WeightGradTile, const at::Tensor&) {
  return Refusal::kNotBuilt;
}

} // namespace customops::cuda::implicit_gemm
#endif
