// The choice between customops' kernels and PyTorch's for one call of a CUDA op (kernels/common/
// backend_choice.h): the op's forced policy, else a timed choice, else the op's rule.
#pragma once

#include <functional>
#include <string>

#include "kernels/common/backend_choice.h"

namespace customops::cuda {

// Whether a choice may be timed now: torch.backends.cudnn.benchmark is on, deterministic algorithms are not
// asked for (a timed choice may differ run to run, and with it the bits), and the current stream is not
// being captured into a CUDA graph (timing synchronizes).
bool may_time_choice();

// For `op`: its forced policy; where it has a choice (`has_choice`) and timing is allowed, the choice timed
// for `key` (timed now, both candidates run a few times on the current stream, if the key is new);
// otherwise `rule`. `key` is only called when a timed choice is looked up.
backend::Impl choose(const std::string& op, bool has_choice, backend::Impl rule,
                     const std::function<std::string()>& key, const std::function<void()>& ours,
                     const std::function<void()>& theirs);

}  // namespace customops::cuda
