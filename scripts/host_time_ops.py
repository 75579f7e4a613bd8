# Host microseconds per call (no autograd, tiny tensors, GPU never the bottleneck) of depthwise passes, ours vs cuDNN.
import os, time, torch, torch.nn.functional as F, customops
dev = torch.device("cuda")
torch.backends.cudnn.benchmark = True
def host_us(fn, n=300):
    for _ in range(30): fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    dt = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return dt
for dt in (torch.bfloat16, torch.float32):
    for cl in (True, False):
        x = torch.randn(8, 96, 14, 14, device=dev, dtype=dt)
        if cl: x = x.to(memory_format=torch.channels_last)
        w = torch.randn(96, 1, 3, 3, device=dev, dtype=dt)
        g = torch.randn_like(x)
        win = ([1, 1], [1, 1], [1, 1])
        rows = {
            "empty_like": lambda: torch.empty_like(x),
            "fwd ours": lambda: torch.ops.customops.depthwise_conv2d(x, w, None, *win),
            "fwd cudnn": lambda: F.conv2d(x, w, None, 1, 1, 1, 96),
            "dgrad ours": lambda: torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, [True, False, False]),
            "dgrad cudnn": lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], 96, [True, False, False]),
            "wgrad ours": lambda: torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, [False, True, False]),
            "wgrad cudnn": lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], 96, [False, True, False]),
        }
        line = f"{str(dt)[6:]:8s} {'cl' if cl else 'nchw':4s}"
        for name, fn in rows.items():
            line += f" | {name} {host_us(fn):.1f}"
        if dt == torch.float32 and cl:
            os.environ["CUSTOMOPS_DEPTHWISE_ALGO"] = "rows"
            line += f" | fwd ours rows {host_us(rows['fwd ours']):.1f} | dgrad ours rows {host_us(rows['dgrad ours']):.1f}"
            os.environ.pop("CUSTOMOPS_DEPTHWISE_ALGO")
        print(line, flush=True)
