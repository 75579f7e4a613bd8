// The silu_mul family under every dispatch key: its kernels, autograd and autocast policy.
#include "kernels/silu_mul.h"
#include "registration/pointwise.h"

CUSTOMOPS_REGISTER_POINTWISE(customops::SiluMul)
