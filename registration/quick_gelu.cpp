// The quick_gelu family under every dispatch key: its kernels, autograd and autocast policy.
#include "kernels/quick_gelu.h"
#include "registration/pointwise.h"

CUSTOMOPS_REGISTER_POINTWISE(customops::QuickGelu)
