// depthwise_conv2d's forward in ExecuTorch's runtime, one build per instruction set: ExecuTorch's tensors onto the
// kernels of kernels/core/depthwise_conv2d.h (blocked over channels) and depthwise_conv2d_rows.h (every other
// call), chosen as libtorch's CPU kernel chooses them.
#include "kernels/core/depthwise_conv2d.h"
#include "kernels/core/depthwise_conv2d_rows.h"
#include "kernels/executorch/isa.h"

namespace customops::executorch_kernels::CPU_CAPABILITY {
namespace {

depthwise_impl::Sizes sizes_of(const Tensor& x, const fold::Window& w) {
  const int64_t H = x.size(2), W = x.size(3);
  return {x.size(0), x.size(1), H, W, fold::window_count(H, w.kh, w.dh, w.ph, w.sh),
          fold::window_count(W, w.kw, w.dw, w.pw, w.sw)};
}

// Whether the blocked kernel takes the call, and else the row kernel's padded plane (false where it overflows).
template <typename opmath_t>
bool plan(const depthwise_impl::Sizes& s, const fold::Window& w, int64_t m, bool* blocked,
          depthwise_impl::Padded* e) {
  *blocked = depthwise_impl::blocked_applies<opmath_t>(s, w, m);
  return *blocked || depthwise_impl::padded_extent<opmath_t>(s.out_h, s.out_w, w, e);
}

template <typename T>
struct VectorBuffer {
  std::vector<T> storage;
  explicit VectorBuffer(int64_t count) : storage(count) {}
  T* data() { return storage.data(); }
};

} // namespace

bool depthwise_takes(const Tensor& x, const fold::Window& w, int64_t m) {
  bool blocked = false;
  depthwise_impl::Padded e{};
  // Half types compute in float.
  return x.scalar_type() == ScalarType::Double ? plan<double>(sizes_of(x, w), w, m, &blocked, &e)
                                               : plan<float>(sizes_of(x, w), w, m, &blocked, &e);
}

void depthwise_forward(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& weight, const Tensor* bias,
                       const fold::Window& w, Tensor& out) {
  const auto s = sizes_of(x, w);
  const int64_t m = out.size(1) / s.C;
  ET_SWITCH_FLOATHBF16_TYPES(x.scalar_type(), ctx, "depthwise_conv2d.out", scalar_t, [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* wp = weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = bias ? bias->const_data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    bool blocked = false;
    depthwise_impl::Padded e{};
    plan<acc_t>(s, w, m, &blocked, &e);  // depthwise_takes has held
    if (blocked) {
      depthwise_impl::forward_blocked<scalar_t, acc_t>(xp, wp, bp, op, s, w, kParallelFor);
    } else {
      depthwise_impl::forward_rows<scalar_t, acc_t, VectorBuffer<acc_t>>(xp, wp, bp, op, s, m, w, e, kParallelFor);
    }
  });
}

} // namespace customops::executorch_kernels::CPU_CAPABILITY
