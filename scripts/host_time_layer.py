# Host time of a depthwise layer's fwd+bwd through the module and autograd, ours against nn.Conv2d, interleaved
# rounds; then both profiles (CPU), to find where ours spends more.
import time, statistics, torch, torch.nn as nn, customops
from torch.profiler import profile, ProfilerActivity
dev = torch.device("cuda")
torch.backends.cudnn.benchmark = True
for amp in (False, True):
    x0 = torch.randn(8, 96, 14, 14, device=dev).to(memory_format=torch.channels_last)
    ref = nn.Sequential(nn.Conv2d(96, 96, 3, 1, 1, groups=96, bias=False)).to(dev).to(memory_format=torch.channels_last)
    ours = customops.convert(ref)
    steps = {}
    for name, mod in (("nn.Conv2d", ref), ("customops", ours)):
        x = x0.clone().requires_grad_()
        def step(mod=mod, x=x):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                y = mod(x)
            y.backward(torch.ones_like(y))
        steps[name] = step
        for _ in range(50): step()
    torch.cuda.synchronize()
    res = {k: [] for k in steps}
    for _ in range(6):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(200): step()
            res[name].append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
    print(f"autocast={amp}: " + " | ".join(f"{k} {statistics.median(v):.1f} us (min {min(v):.1f})" for k, v in res.items()), flush=True)
    for name, step in steps.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(50): step()
        print("=====", name, "autocast", amp)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=70))
