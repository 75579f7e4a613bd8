// conv2d as im2col + GEMM. With G groups, a batch chunk of nc images, Og = O/G
// output and Kg = (C/G)*kh*kw column rows per group, L = out_h*out_w:
//   forward       out[n, g]  (Og, L)  = W[g] (Og, Kg)  @ cols[n, g] (Kg, L)
//   input grad    gcols[n, g] (Kg, L) = W[g]^T          @ gout[n, g] (Og, L), then col2im
//   weight grad   gW[g]     (Og, Kg)  = sum_n gout[n, g] @ cols[n, g]^T
// each one batched matrix product over the nc*G (image, group) pairs; BLAS or
// cuBLAS does the arithmetic. A 1x1 convolution of NHWC memory needs no columns
// nor a conversion to NCHW: see the nhwc_pointwise functions.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/conv2d.h"

namespace customops::conv {
namespace {

struct Gemm {
  Shape<int64_t> s;
  fold::Window w;
  int64_t G, Og, Kg, L;
  bool pointwise;  // 1x1, stride 1, unpadded: the image is its own column matrix
  at::Tensor x;    // contiguous (N, C, H, W)
  at::Tensor wg;   // contiguous (G, Og, Kg)

  // wg for every image of a chunk of nc: a stride-0 view when G == 1.
  at::Tensor weight_batch(int64_t nc) const {
    return wg.unsqueeze(0).expand({nc, G, Og, Kg}).reshape({nc * G, Og, Kg});
  }

  // Images per chunk when each image holds a column buffer and, for the weight
  // gradient, its (Og, Kg) products until they are summed. As many as fit:
  // equal chunks (16 + 16 images rather than 18 + 14) made cuBLAS slower on an H100.
  int64_t chunk(bool weight_partials) const {
    const int64_t N = std::max<int64_t>(s.N, 1);
    if (pointwise && !weight_partials) return N;
    const int64_t columns = pointwise ? 0 : s.C * w.kh * w.kw * L;
    const int64_t per_image = (columns + (weight_partials ? G * Og * Kg : 0)) * x.element_size();
    return std::clamp<int64_t>(workspace_limit_bytes() / per_image, 1, N);
  }

  // Columns (nc*G, Kg, L) of images [n0, n0 + nc).
  at::Tensor columns(const GemmBackend& backend, int64_t n0, int64_t nc) const {
    const auto images = x.narrow(0, n0, nc);
    if (pointwise) return images.view({nc * G, Kg, L});
    auto cols = at::empty({nc, s.C * w.kh * w.kw, L}, x.options());
    backend.im2col({images, cols, w, nc, s.C, s.H, s.W, s.out_h, s.out_w});
    return cols.view({nc * G, Kg, L});
  }
};

// The forward GEMMs one chunk of the batch after another.
void forward_serial(const Gemm& p, const GemmBackend& backend, at::Tensor& out) {
  const int64_t chunk = p.chunk(false), N = p.s.N;
  const auto weights = p.weight_batch(std::min(chunk, N));
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nc = std::min(chunk, N - n0);
    // The chunk's columns are freed before the next chunk's are made, so the
    // caching allocators hand the same block back.
    const auto cols = p.columns(backend, n0, nc);
    auto dst = out.narrow(0, n0, nc).view({nc * p.G, p.Og, p.L});
    at::bmm_out(dst, weights.narrow(0, 0, nc * p.G), cols);
  }
}

// s and w: check()'s results for these arguments.
Gemm plan(const GemmBackend& backend, const Shape<int64_t>& s, const fold::Window& w, const at::Tensor& input,
          const at::Tensor& weight, int64_t groups) {
  const int64_t G = groups, Og = s.O / G, Kg = (s.C / G) * w.kh * w.kw;
  const bool pointwise = w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && w.ph == 0 && w.pw == 0;
  auto x = backend.to_format(s.batched ? input : input.unsqueeze(0), at::MemoryFormat::Contiguous);
  return {s, w, G, Og, Kg, s.out_h * s.out_w, pointwise, x, weight.contiguous().view({G, Og, Kg})};
}

// (N, C, H, W) with channels_last memory as the (N*H*W, C) matrix of its pixels: a view when t is dense in
// that layout, else a copy.
at::Tensor pixel_rows(const at::Tensor& t) {
  return t.permute({0, 2, 3, 1}).reshape({-1, t.size(1)});
}

// A 1x1, unit-stride, unpadded, ungrouped convolution of a batch in channels_last memory is one GEMM with the
// pixels as rows, one image after another: forward Y (NHW, O) = X (NHW, C) @ W^T (C, O) + b, input gradient
// gX = gY @ W, weight gradient gW = gY^T @ X (the batch is the reduction). No column buffer, no NCHW copy.
bool nhwc_pointwise(const at::Tensor& input, const fold::Window& w, int64_t groups) {
  return input.dim() == 4 && result_format(input) == at::MemoryFormat::ChannelsLast && groups == 1 && w.kh == 1 &&
         w.kw == 1 && w.sh == 1 && w.sw == 1 && w.ph == 0 && w.pw == 0;
}

at::Tensor nhwc_pointwise_forward(const at::Tensor& input, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias, const Shape<int64_t>& s) {
  auto out = at::empty({s.N, s.O, s.out_h, s.out_w}, input.options().memory_format(at::MemoryFormat::ChannelsLast));
  auto rows = pixel_rows(out);  // a view: out is dense channels_last
  const auto w_t = weight.reshape({s.O, s.C}).t();
  if (bias.has_value() && bias->defined()) {
    at::addmm_out(rows, *bias, pixel_rows(input), w_t);
  } else {
    at::mm_out(rows, pixel_rows(input), w_t);
  }
  return out;
}

Grads nhwc_pointwise_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                              const Shape<int64_t>& s, std::array<bool, 3> output_mask) {
  const auto g = pixel_rows(grad_out);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = at::empty({s.N, s.C, s.H, s.W}, input.options().memory_format(at::MemoryFormat::ChannelsLast));
    auto rows = pixel_rows(grad_input);
    at::mm_out(rows, g, weight.reshape({s.O, s.C}));
  }
  if (output_mask[1]) {
    grad_weight = at::mm(g.t(), pixel_rows(input)).view(weight.sizes()).contiguous(weight.suggest_memory_format());
  }
  if (output_mask[2]) grad_bias = g.sum(0);
  return {grad_input, grad_weight, grad_bias};
}

} // namespace

int64_t workspace_limit_bytes() {
  // Read on every call (a getenv is cheap next to a convolution), so it can be
  // changed in a running process.
  const char* mib = std::getenv("CUSTOMOPS_CONV2D_WORKSPACE_MIB");
  const int64_t parsed = mib == nullptr ? 0 : std::atoll(mib);
  return (parsed > 0 ? parsed : 256) << 20;
}

at::Tensor gemm_forward(const GemmBackend& backend, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, int64_t groups) {
  fold::Window w{};
  const auto shape = check<int64_t>("conv2d", false, input, weight, bias, stride, padding, dilation, groups, &w);
  if (nhwc_pointwise(input, w, groups)) return nhwc_pointwise_forward(input, weight, bias, shape);
  const auto p = plan(backend, shape, w, input, weight, groups);
  const auto& s = p.s;
  auto out = at::empty({s.N, s.O, s.out_h, s.out_w}, p.x.options());
  // Overlapping chunk k+1's im2col (on a second stream) with chunk k's GEMM was
  // tried and measured slower on an H100 (both are bound by memory traffic).
  forward_serial(p, backend, out);
  if (bias.has_value() && bias->defined()) {
    out.add_(bias->view({1, s.O, 1, 1}));
  }
  // The GEMMs write NCHW; a channels_last input gets a channels_last result
  // (PyTorch's rule) through one conversion.
  return s.batched ? backend.to_format(out, result_format(input)) : out.squeeze(0);
}


Grads gemm_backward(const GemmBackend& backend, const at::Tensor& grad_out, const at::Tensor& input,
                    const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                    at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  fold::Window w{};
  const auto shape =
      check<int64_t>("conv2d_backward", false, input, weight, std::nullopt, stride, padding, dilation, groups, &w);
  check_grad_out("conv2d_backward", grad_out, input, shape);
  if (nhwc_pointwise(input, w, groups)) return nhwc_pointwise_backward(grad_out, input, weight, shape, output_mask);
  const auto p = plan(backend, shape, w, input, weight, groups);
  const auto& s = p.s;
  const auto gout = backend.to_format(s.batched ? grad_out : grad_out.unsqueeze(0), at::MemoryFormat::Contiguous);
  const auto opmath = at::toOpMathType(p.x.scalar_type());

  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty({s.N, s.C, s.H, s.W}, p.x.options());
  if (output_mask[1]) grad_weight = at::zeros({p.G * p.Og * p.Kg}, p.x.options().dtype(opmath));
  // A chunk's columns for the weight gradient are freed before the input
  // gradient's are made (the caching allocators hand the same block back), so
  // one column buffer is alive at a time.
  const int64_t chunk = p.chunk(output_mask[1]);
  const auto weights = p.weight_batch(std::min(chunk, s.N));
  for (int64_t n0 = 0; n0 < s.N && (output_mask[0] || output_mask[1]); n0 += chunk) {
    const int64_t nc = std::min(chunk, s.N - n0);
    const auto g = gout.narrow(0, n0, nc).view({nc * p.G, p.Og, p.L});
    if (output_mask[1]) {
      // Per-image products summed in opmath: the batch sum is the reduction.
      const auto per_image = at::bmm(g, p.columns(backend, n0, nc).mT());
      grad_weight.add_(per_image.view({nc, -1}).sum(0, false, opmath));
    }
    if (output_mask[0]) {
      const auto w_t = weights.narrow(0, 0, nc * p.G).mT();
      auto dst = grad_input.narrow(0, n0, nc);
      if (p.pointwise) {
        auto dst_view = dst.view({nc * p.G, p.Kg, p.L});
        at::bmm_out(dst_view, w_t, g);
      } else {
        const auto gcols = at::bmm(w_t, g).view({nc, s.C * p.w.kh * p.w.kw, p.L});
        backend.col2im({gcols, dst, p.w, nc, s.C, s.H, s.W, s.out_h, s.out_w});
      }
    }
  }
  if (output_mask[0]) {
    grad_input = s.batched ? backend.to_format(grad_input, result_format(input)) : grad_input.squeeze(0);
  }
  // In weight's memory format, as PyTorch's convolutions and the implicit-GEMM path return it.
  if (output_mask[1]) {
    grad_weight = grad_weight.view(weight.sizes()).to(weight.scalar_type()).contiguous(weight.suggest_memory_format());
  }
  if (output_mask[2]) grad_bias = gout.sum({0, 2, 3});
  return {grad_input, grad_weight, grad_bias};
}

} // namespace customops::conv
