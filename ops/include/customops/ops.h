// customops public C++ API: one header per operator family.
//
// Every function here calls its operator through the PyTorch dispatcher, so it
// runs the same CPU/CUDA/Meta kernels and autograd as torch.ops.customops.* in
// Python and TorchScript.
#pragma once

#include <customops/backends.h>
#include <customops/conv.h>
#include <customops/fold.h>
#include <customops/quick_gelu.h>
#include <customops/silu_mul.h>
#include <customops/trilinear.h>
#include <customops/upsample.h>
