// The gelu_tanh_mul family under every dispatch key: its kernels, autograd and autocast policy.
#include "kernels/gelu_tanh_mul.h"
#include "registration/pointwise.h"

CUSTOMOPS_REGISTER_POINTWISE(customops::GeluTanhMul)
