#!/usr/bin/env python3
"""bench/reference_pytorch.py — PyTorch's own training loop for the same GPT presets as
`graphed bench`, timed the same way, so ratios come from one run on one GPU.

Modes (one row each):
  eager           plain PyTorch: fused AdamW, clip_grad_norm_, bf16 autocast
  full_iteration  forward + backward + clipping + a capturable AdamW step captured in one
                  torch.cuda.graph and replayed (static input buffers filled with copy_)
  per_layer       torch.cuda.make_graphed_callables over all transformer blocks in one call (one
                  shared pool; forward and backward graph per block); embeddings, loss, clipping and
                  the fused AdamW step stay eager (PyTorch's counterpart of transformer_engine)
  compile         torch.compile(model, mode="reduce-overhead"): Inductor kernels in CUDA-graph
                  trees; the fused AdamW step and clipping stay eager (compile time = "capture s")

Same architecture and initialization as graphed (GPT-2 style: LayerNorm, learned positions,
fused QKV, GELU MLP of 4 x hidden, biases, tied embeddings, normal(0, 0.02) weights with the
output projections scaled by 1/sqrt(2 x layers)); synthetic tokens; dropout 0; AdamW.
Usage: python3 bench/reference_pytorch.py --preset small [--iters 50 --warmup 10] [--json]
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PRESETS = {  # layers, hidden, heads, seq, micro batch, vocab (DESIGN.md section 8)
    "tiny": (2, 128, 2, 64, 8, 1024),
    "small": (4, 256, 4, 128, 8, 1024),
    "gpt-125m": (12, 768, 12, 512, 8, 50304),
}


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, layers, std):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, 4 * hidden)
        self.fc2 = torch.nn.Linear(4 * hidden, hidden)
        for linear, scale in ((self.qkv, 1.0), (self.proj, 1 / math.sqrt(2 * layers)),
                              (self.fc1, 1.0), (self.fc2, 1 / math.sqrt(2 * layers))):
            torch.nn.init.normal_(linear.weight, 0.0, std * scale)
            torch.nn.init.zeros_(linear.bias)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab, std=0.02):
        super().__init__()
        self.embedding = torch.nn.Parameter(torch.randn(vocab, hidden) * std)
        self.positions = torch.nn.Parameter(torch.randn(seq, hidden) * std)
        self.blocks = torch.nn.ModuleList(Block(hidden, heads, layers, std) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(hidden)

    def forward(self, tokens, labels):
        x = self.embedding[tokens] + self.positions[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln(x), self.embedding).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


def build(preset, capturable):
    layers, hidden, heads, seq, micro, vocab = PRESETS[preset]
    torch.manual_seed(1234)
    model = Gpt(layers, hidden, heads, seq, vocab).cuda()
    if capturable:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=True, foreach=True)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    generator = torch.Generator(device="cuda").manual_seed(1234)
    data = torch.randint(0, vocab, (64, micro, seq + 1), device="cuda", generator=generator)
    return model, optimizer, data, micro * seq


def step(model, optimizer, tokens, labels):
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        loss = model(tokens, labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    optimizer.step()
    return loss


def timed_loop(iteration, iters, warmup):
    """Runs iteration(i) warmup + iters times synchronized, then iters times back to back. Returns the
    CUDA-event and host-enqueue milliseconds of each synchronized iteration, the pipelined milliseconds
    per iteration (one event pair around iterations with no synchronization between them, as training
    runs) and the last return value."""
    times, host_times, result = [], [], None
    for i in range(warmup + iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host_start = time.perf_counter()
        start.record()
        result = iteration(i)
        end.record()
        host = (time.perf_counter() - host_start) * 1000
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
            host_times.append(host)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(warmup + iters, warmup + 2 * iters):
        iteration(i)
    end.record()
    end.synchronize()
    pipelined = start.elapsed_time(end) / iters
    return times, host_times, pipelined, result


def eager_iteration(model, optimizer, data):
    def iteration(i):
        batch = data[i % len(data)]
        optimizer.zero_grad(set_to_none=False)
        return step(model, optimizer, batch[:, :-1], batch[:, 1:])
    return iteration


def time_eager(preset, iters, warmup):
    model, optimizer, data, tokens = build(preset, capturable=False)
    times, host_times, pipelined, loss = timed_loop(eager_iteration(model, optimizer, data), iters, warmup)
    batch = data[0]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        optimizer.zero_grad(set_to_none=False)
        step(model, optimizer, batch[:, :-1], batch[:, 1:])
        torch.cuda.synchronize()
    events = prof.events()
    counts = {"ops": sum(1 for e in events if e.name.startswith("aten::")),
              "kernels": sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)}
    return times, host_times, pipelined, loss.item(), tokens, 0.0, counts


def time_per_layer(preset, iters, warmup):
    model, optimizer, data, tokens = build(preset, capturable=False)
    _, hidden, _, seq, micro, _ = PRESETS[preset]
    for p in model.parameters():  # grads allocated up front: accumulation is then in place (PyTorch #181723)
        p.grad = torch.zeros_like(p)
    capture_start = time.perf_counter()
    samples = tuple((torch.randn(micro, seq, hidden, device="cuda", requires_grad=True),) for _ in model.blocks)
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), samples)
    model.blocks = torch.nn.ModuleList(graphed)
    torch.cuda.synchronize()
    capture_seconds = time.perf_counter() - capture_start
    times, host_times, pipelined, loss = timed_loop(eager_iteration(model, optimizer, data), iters, warmup)
    return times, host_times, pipelined, loss.item(), tokens, capture_seconds, {"ops": 0, "kernels": 0}


def time_full_iteration(preset, iters, warmup):
    model, optimizer, data, tokens = build(preset, capturable=True)
    static_tokens = data[0, :, :-1].clone()
    static_labels = data[0, :, 1:].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):  # warmup on a side stream, as torch.cuda.graph requires
            optimizer.zero_grad(set_to_none=False)
            step(model, optimizer, static_tokens, static_labels)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    capture_start = time.perf_counter()
    optimizer.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        for p in model.parameters():  # zeroing the gradients is part of the graph
            p.grad.zero_()
        static_loss = step(model, optimizer, static_tokens, static_labels)
    torch.cuda.synchronize()
    capture_seconds = time.perf_counter() - capture_start

    def replay(i):
        batch = data[i % len(data)]
        static_tokens.copy_(batch[:, :-1])
        static_labels.copy_(batch[:, 1:])
        graph.replay()

    times, host_times, pipelined, _ = timed_loop(replay, iters, warmup)
    return times, host_times, pipelined, static_loss.item(), tokens, capture_seconds, {"ops": 0, "kernels": 0}


def compiled_step(compiled, optimizer, tokens, labels):
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        loss = compiled(tokens, labels)
    value = loss.detach().clone()  # outputs of CUDA-graph trees are overwritten by the next run
    loss.backward()
    torch.nn.utils.clip_grad_norm_(compiled.parameters(), 1.0, foreach=True)
    optimizer.step()
    return value


def time_compiled(preset, iters, warmup, trees=True):
    torch._dynamo.reset()
    torch._inductor.config.triton.cudagraph_trees = trees
    model, optimizer, data, tokens = build(preset, capturable=False)
    compiled = torch.compile(model, mode="reduce-overhead")
    compile_start = time.perf_counter()
    compile_seconds = 0.0

    def iteration(i):
        nonlocal compile_seconds
        if i == warmup:
            compile_seconds = time.perf_counter() - compile_start  # compilation happens in the warmup
        batch = data[i % len(data)]
        if trees:
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=False)
        return compiled_step(compiled, optimizer, batch[:, :-1], batch[:, 1:])

    times, host_times, pipelined, loss = timed_loop(iteration, iters, warmup)
    return times, host_times, pipelined, loss.item(), tokens, compile_seconds, {"ops": 0, "kernels": 0}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("reference_pytorch.py needs a CUDA GPU")
    rows = []
    modes = (("eager", time_eager), ("full_iteration", time_full_iteration), ("per_layer", time_per_layer),
             ("compile", time_compiled),
             ("compile (no cudagraph trees)", lambda p, i, w: time_compiled(p, i, w, trees=False)))
    for name, runner in modes:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            times, host_times, pipelined, loss, tokens, capture, counts = runner(args.preset, args.iters, args.warmup)
        except Exception as error:  # a mode that fails here is reported, not fatal
            print(f"reference: {name} failed on {args.preset}: {type(error).__name__}: {error}", file=sys.stderr)
            continue
        median = statistics.median(times)
        rows.append({"impl": "pytorch " + name, "ms_per_iter": median, "pipelined_ms_per_iter": pipelined,
                     "host_ms_per_iter": statistics.median(host_times),
                     "ops_per_iter": counts["ops"], "kernels_per_iter": counts["kernels"],
                     "tokens_per_s": tokens / (pipelined / 1000),
                     "capture_s": capture, "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
                     "reserved_mib": torch.cuda.memory_reserved() / 2**20, "loss": loss,
                     "preset": args.preset, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                     "iters": args.iters, "warmup": args.warmup})
    for row in rows:
        row["speedup_vs_eager"] = rows[0]["ms_per_iter"] / row["ms_per_iter"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"reference: preset {args.preset}, {rows[0]['device']}, torch {torch.__version__}, "
          f"{args.warmup} warmup + {args.iters} timed iterations (median), bf16 autocast")
    print("| impl | ms/iter | pipelined ms/iter | host ms/iter | tokens/s | speedup vs eager | capture s | peak MiB | loss |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['impl']} | {r['ms_per_iter']:.3f} | {r['pipelined_ms_per_iter']:.3f} | {r['host_ms_per_iter']:.3f} | "
              f"{r['tokens_per_s']:.0f} | {r['speedup_vs_eager']:.2f} | "
              f"{r['capture_s']:.2f} | {r['peak_mib']:.1f} | {r['loss']:.4f} |")


if __name__ == "__main__":
    main()
