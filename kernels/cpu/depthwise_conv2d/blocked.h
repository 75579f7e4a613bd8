// The channel-blocked depthwise forward (blocked.cpp), used by
// depthwise_conv2d.cpp where it applies.
#pragma once

#include "kernels/conv2d.h"

namespace customops::cpu::CPU_CAPABILITY {

// True where the blocked forward handles the plan and pays: channel
// multiplier 1, and enough channels to fill most lanes of each vector.
bool depthwise_blocked_applies(const conv::DepthwisePlan& p);

// Writes p.out = depthwise_conv2d(p.x, p.weight, p.bias) for such a plan.
void depthwise_forward_blocked(const conv::DepthwisePlan& p);

} // namespace customops::cpu::CPU_CAPABILITY
