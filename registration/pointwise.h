// Registration of a pointwise family (kernels/common/pointwise.h) under every
// dispatch key, from its formulas: CUSTOMOPS_REGISTER_POINTWISE(Family), in the
// file cmake/CustomopsPointwise.cmake writes for it, registers the CPU, CUDA and
// Meta kernels, the autograd of the op and of its backward op (whose own gradient, the double backward,
// evaluates the family's derivatives on ATen tensors, so it is differentiable in
// turn), and the autocast policy: an op of one input runs in its dtype, an op of
// several in the widest of theirs (as ATen's mul, autocast's "promote" list). A family's
// scalar arguments (kArgs) follow its tensors in every signature; autograd keeps them in
// its saved data for the backward op and the double backward.
#pragma once

#include <ATen/ATen.h>
#include <customops/detail/find_op.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/pointwise.h"
#include "kernels/meta/pointwise.h"
#include "registration/autocast.h"
#include "registration/out_variant.h"

namespace customops::pw {

// A value of the formulas on tensors: an ATen tensor, or a number (the formulas'
// constants, T(1), and what they make of numbers alone).
class Expr {
 public:
  explicit Expr(double c) : c_(c) {}
  explicit Expr(at::Tensor t) : t_(std::move(t)) {}

  bool is_tensor() const { return t_.defined(); }
  bool is_zero() const { return !is_tensor() && c_ == 0; }
  const at::Tensor& t() const { return t_; }
  double c() const { return c_; }
  // The value as a tensor, a number filling `like`.
  at::Tensor tensor(const at::Tensor& like) const { return is_tensor() ? t_ : at::full_like(like, c_); }

  friend Expr operator+(const Expr& a, const Expr& b) {
    if (!a.is_tensor()) return b.is_tensor() ? Expr(b.t_ + a.c_) : Expr(a.c_ + b.c_);
    return Expr(b.is_tensor() ? a.t_ + b.t_ : a.t_ + b.c_);
  }
  friend Expr operator-(const Expr& a, const Expr& b) {
    if (!a.is_tensor()) return b.is_tensor() ? Expr(at::rsub(b.t_, a.c_)) : Expr(a.c_ - b.c_);
    return Expr(b.is_tensor() ? a.t_ - b.t_ : a.t_ - b.c_);
  }
  friend Expr operator*(const Expr& a, const Expr& b) {
    if (!a.is_tensor()) return b.is_tensor() ? Expr(b.t_ * a.c_) : Expr(a.c_ * b.c_);
    return Expr(b.is_tensor() ? a.t_ * b.t_ : a.t_ * b.c_);
  }
  friend Expr operator/(const Expr& a, const Expr& b) {
    if (!a.is_tensor()) return b.is_tensor() ? Expr(at::reciprocal(b.t_) * a.c_) : Expr(a.c_ / b.c_);
    return Expr(b.is_tensor() ? a.t_ / b.t_ : a.t_ / b.c_);
  }
  friend Expr operator-(const Expr& a) { return a.is_tensor() ? Expr(-a.t_) : Expr(-a.c_); }

 private:
  at::Tensor t_;
  double c_ = 0;
};

template <>
struct Maths<Expr> {
  static Expr exp(const Expr& x) { return x.is_tensor() ? Expr(at::exp(x.t())) : Expr(std::exp(x.c())); }
  static Expr tanh(const Expr& x) { return x.is_tensor() ? Expr(at::tanh(x.t())) : Expr(std::tanh(x.c())); }
  static Expr sigmoid(const Expr& x) {
    return x.is_tensor() ? Expr(at::sigmoid(x.t())) : Expr(1 / (1 + std::exp(-x.c())));
  }
};

inline void add_to(at::Tensor& sum, const at::Tensor& term) {
  sum = sum.defined() ? sum + term : term;
}

// A scalar argument saved for the backward (autograd's saved data holds IValues), and read back.
template <typename A>
A saved_arg(const c10::IValue& v) {
  if constexpr (std::is_same_v<A, c10::string_view>) {
    return v.toStringView();
  } else {
    return v.to<A>();
  }
}
template <typename A>
c10::IValue to_saved(const A& a) {
  if constexpr (std::is_same_v<A, c10::string_view>) {
    return c10::IValue(std::string(a.data(), a.size()));
  } else {
    return c10::IValue(a);
  }
}
inline std::string saved_name(std::size_t k) {
  return "arg" + std::to_string(k);
}

template <typename F, typename = std::make_index_sequence<arity<F>>, typename = std::make_index_sequence<arg_count<F>>>
struct Registration;

// N tensors I and the scalar arguments K (kArgs, after the tensors in every schema: the op's, its backward's and
// its out variant's before `out`).
template <typename F, std::size_t... I, std::size_t... K>
struct Registration<F, std::index_sequence<I...>, std::index_sequence<K...>> {
  static constexpr std::size_t N = sizeof...(I);
  using variable_list = torch::autograd::variable_list;
  using AutogradContext = torch::autograd::AutogradContext;

  static at::Tensor call_forward(TensorArg<I>... xs, ArgArg<F, K>... args) {
    static const auto op = detail::find_op<at::Tensor(TensorArg<I>..., ArgArg<F, K>...)>(
        (std::string("customops::") + F::kName).c_str());
    return op.call(xs..., args...);
  }

  static Grads<F> call_backward(const at::Tensor& grad_out, TensorArg<I>... xs, ArgArg<F, K>... args) {
    static const auto op = detail::find_op<Grads<F>(const at::Tensor&, TensorArg<I>..., ArgArg<F, K>...)>(
        ("customops::" + backward_name(F::kName)).c_str());
    return op.call(grad_out, xs..., args...);
  }

  static variable_list as_list(const Grads<F>& grads) {
    if constexpr (N == 1) {
      return {grads};
    } else {
      return {std::get<I>(grads)...};
    }
  }

  static void save_args(AutogradContext* ctx, const ArgArg<F, K>&... args) {
    ((ctx->saved_data[saved_name(K)] = to_saved(args)), ...);
  }

  struct Forward : torch::autograd::Function<Forward> {
    static at::Tensor forward(AutogradContext* ctx, TensorArg<I>... xs, ArgArg<F, K>... args) {
      ctx->save_for_backward({xs...});
      save_args(ctx, args...);
      at::AutoDispatchBelowADInplaceOrView guard;
      return call_forward(xs..., args...);
    }
    static variable_list backward(AutogradContext* ctx, variable_list grads) {
      const auto saved = ctx->get_saved_variables();
      // Through the dispatcher, so the gradient is itself differentiable; none for the scalar arguments.
      auto out = as_list(call_backward(grads[0], saved[I]...,
                                       saved_arg<ArgArg<F, K>>(ctx->saved_data[saved_name(K)])...));
      out.resize(N + sizeof...(K));
      return out;
    }
  };

  struct Backward : torch::autograd::Function<Backward> {
    static variable_list forward(AutogradContext* ctx, const at::Tensor& grad_out, TensorArg<I>... xs,
                                 ArgArg<F, K>... args) {
      ctx->save_for_backward({grad_out, xs...});
      save_args(ctx, args...);
      at::AutoDispatchBelowADInplaceOrView guard;
      return as_list(call_backward(grad_out, xs..., args...));
    }
    // The backward op computes grad_i = g * df/dxi; with gg_i the gradient of grad_i, its own
    // gradients are sum_i gg_i * df/dxi for g and g * sum_i gg_i * d2f/dxi dxj for each xj.
    static variable_list backward(AutogradContext* ctx, variable_list gg) {
      const auto saved = ctx->get_saved_variables();
      const at::Tensor& grad_out = saved[0];
      const auto a = arg_values<F>(F::kName, saved_arg<ArgArg<F, K>>(ctx->saved_data[saved_name(K)])...);
      const auto d = derivatives_of<F>(a, Expr(saved[1 + I])...);
      const auto h = second_derivatives_of<F>(a, Expr(saved[1 + I])...);
      at::Tensor d_grad_out;
      std::array<at::Tensor, N> d_x;
      for (std::size_t i = 0; i < N; ++i) {
        if (!gg[i].defined()) continue;
        const Expr g_i(gg[i]);
        if (!d[i].is_zero()) add_to(d_grad_out, (g_i * d[i]).tensor(gg[i]));
        for (std::size_t j = 0; j < N; ++j) {
          if (!h[i * N + j].is_zero()) add_to(d_x[j], (g_i * h[i * N + j]).tensor(gg[i]));
        }
      }
      for (auto& t : d_x) {
        if (t.defined()) t = t * grad_out;
      }
      return {d_grad_out, d_x[I]..., (static_cast<void>(K), at::Tensor())...};
    }
  };

  static at::Tensor forward_autograd(TensorArg<I>... xs, ArgArg<F, K>... args) {
    // None fails here with its name, not in autograd's bookkeeping.
    (checks::defined(F::kName, F::kInputs[I], xs), ...);
    return Forward::apply(xs..., args...);
  }

  static Grads<F> backward_autograd(const at::Tensor& grad_out, TensorArg<I>... xs, ArgArg<F, K>... args) {
    const std::string op = backward_name(F::kName);
    checks::defined(op.c_str(), "grad_out", grad_out);
    (checks::defined(op.c_str(), F::kInputs[I], xs), ...);
    const auto grads = Backward::apply(grad_out, xs..., args...);
    return as_grads(std::array<at::Tensor, N>{grads[I]...});
  }

  // Autocast's promote policy: every floating input cast to the widest floating dtype among them.
  template <typename... Ts>
  static at::ScalarType widest(const Ts&... xs) {
    c10::optional<at::ScalarType> t;
    for (const at::Tensor* x : {&xs...}) {
      if (x->defined() && x->is_floating_point()) t = t ? at::promote_types(*t, x->scalar_type()) : x->scalar_type();
    }
    return t.value_or(at::kFloat);
  }
  static at::Tensor cast(const at::Tensor& x, at::ScalarType t) {
    return x.defined() && x.is_floating_point() ? x.to(t) : x;
  }
  template <c10::DeviceType device>
  static at::Tensor forward_promoted(TensorArg<I>... xs, ArgArg<F, K>... args) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
    const auto t = widest(xs...);
    return call_forward(cast(xs, t)..., args...);
  }
  template <c10::DeviceType device>
  static Grads<F> backward_promoted(const at::Tensor& grad_out, TensorArg<I>... xs, ArgArg<F, K>... args) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
    const auto t = widest(grad_out, xs...);
    return call_backward(cast(grad_out, t), cast(xs, t)..., args...);
  }

  template <typename Forward, typename Backward>
  static void impl(torch::Library& m, Forward forward, Backward backward) {
    m.impl(F::kName, forward);
    m.impl(backward_name(F::kName).c_str(), backward);
  }

  static void register_cpu(torch::Library& m) {
    impl(m, CUSTOMOPS_CPU_KERNEL(Pointwise<F>::forward), CUSTOMOPS_CPU_KERNEL(Pointwise<F>::backward));
  }
  static void register_cuda(torch::Library& m) {
#if defined(CUSTOMOPS_WITH_CUDA)
    impl(m, &::customops::cuda::Pointwise<F>::forward, &::customops::cuda::Pointwise<F>::backward);
#endif
  }
  static void register_meta(torch::Library& m) {
    impl(m, &::customops::meta::Pointwise<F>::forward, &::customops::meta::Pointwise<F>::backward);
  }
  static void register_autograd(torch::Library& m) {
    impl(m, &forward_autograd, &backward_autograd);
  }
  // The out variant (ExecuTorch's programs call it): the op through the dispatcher, copied into `out`.
  static at::Tensor& forward_out(TensorArg<I>... xs, ArgArg<F, K>... args, at::Tensor& out) {
    const std::string op = std::string(F::kName) + ".out";
    return out_variant::into(op.c_str(), call_forward(xs..., args...), out);
  }
  static void register_out(torch::Library& m) {
    m.impl((std::string(F::kName) + ".out").c_str(), &forward_out);
  }
  template <c10::DeviceType device>
  static void register_autocast(torch::Library& m) {
    if constexpr (N == 1) {
      ::customops::autocast::keep_input_dtype(m, {F::kName, backward_name(F::kName).c_str()});
    } else {
      impl(m, &forward_promoted<device>, &backward_promoted<device>);
    }
  }
};

} // namespace customops::pw

// Every kernel, the autograd and the autocast policy of the pointwise family
// `Family` (a struct of kernels/<family>.h).
#define CUSTOMOPS_REGISTER_POINTWISE(Family)                                           \
  TORCH_LIBRARY_IMPL(customops, CPU, m) {                                             \
    customops::pw::Registration<Family>::register_cpu(m);                                      \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, CUDA, m) {                                            \
    customops::pw::Registration<Family>::register_cuda(m);                                     \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, Meta, m) {                                            \
    customops::pw::Registration<Family>::register_meta(m);                                     \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, Autograd, m) {                                        \
    customops::pw::Registration<Family>::register_autograd(m);                                 \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {                       \
    customops::pw::Registration<Family>::register_out(m);                                      \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, AutocastCPU, m) {                                     \
    customops::pw::Registration<Family>::register_autocast<c10::DeviceType::CPU>(m);           \
  }                                                                                   \
  TORCH_LIBRARY_IMPL(customops, AutocastCUDA, m) {                                    \
    customops::pw::Registration<Family>::register_autocast<c10::DeviceType::CUDA>(m);          \
  }
