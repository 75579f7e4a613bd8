#include "kernels/silu_mul.h"

#include "kernels/cpu/common/pointwise.h"

template struct customops::cpu::CPU_CAPABILITY::Pointwise<customops::SiluMul>;
