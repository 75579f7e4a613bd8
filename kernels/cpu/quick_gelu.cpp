#include "kernels/quick_gelu.h"

#include "kernels/cpu/common/pointwise.h"

template struct customops::cpu::CPU_CAPABILITY::Pointwise<customops::QuickGelu>;
