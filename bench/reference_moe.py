#!/usr/bin/env python3
"""bench/reference_moe.py — PyTorch's own training loop for graphed's moe-1b preset, timed as
bench/reference_pytorch.py times the GPT presets (its timed_loop and modes), so `graphed bench --preset
moe-1b` and this script give ratios from one run on one GPU.

The model is moe-1b as graphed builds it: Llama style (RMSNorm, RoPE, GQA through scaled_dot_product_attention,
no biases, untied output), 16 layers of hidden 2048, every MLP a dropless MoE of 8 SwiGLU experts (ffn 2048)
with top-2 routing (top-k of the router logits, softmax over the two) and Switch load balancing (0.01).
The experts run one of two ways:
  grouped_mm  assignments sorted by expert, both expert GEMMs through torch._grouped_mm with the offsets on the
              device: no host synchronisation, static shapes (what transformers 5 does on Hopper)
  loop        one matmul pair per expert over its rows, the counts read on the host (transformers 4's way)
Modes (one row each): eager with each expert form; full_iteration (forward, backward, clipping and a
capturable AdamW step in one torch.cuda.graph, grouped_mm); compile (torch.compile(model,
mode="reduce-overhead") without CUDA-graph trees, grouped_mm; "capture s" is its compile time).
Usage: python3 bench/reference_moe.py [--iters 20 --warmup 5] [--json] [--layers 16]
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_pytorch  # noqa: E402  (its timed loop and modes)

LAYERS, HIDDEN, HEADS, GROUPS, SEQ, MICRO, VOCAB = 16, 2048, 32, 8, 2048, 1, 32000
EXPERTS, TOP_K, EXPERT_FFN, AUX_COEFF, STD = 8, 2, 2048, 0.01, 0.02


class Experts(torch.nn.Module):
    def __init__(self, layers, form):
        super().__init__()
        self.form = form
        scale = STD / (2 * layers) ** 0.5
        self.router = torch.nn.Parameter(torch.randn(EXPERTS, HIDDEN) * STD)
        self.w1 = torch.nn.Parameter(torch.randn(EXPERTS, HIDDEN, 2 * EXPERT_FFN) * STD)
        self.w2 = torch.nn.Parameter(torch.randn(EXPERTS, EXPERT_FFN, HIDDEN) * scale)

    def forward(self, x):
        tokens = x.reshape(-1, HIDDEN)
        logits = F.linear(tokens.float(), self.router)  # bf16 under autocast, as graphed's router
        top_logits, indices = logits.topk(TOP_K, dim=-1)
        weights = torch.softmax(top_logits, dim=-1)
        probabilities = torch.softmax(logits, dim=-1)
        flat = indices.view(-1)
        # Counted without a host synchronisation (bincount reads the maximum on the host), so a graph can hold it.
        counts = torch.zeros(EXPERTS, dtype=torch.long, device=x.device).scatter_add_(0, flat, torch.ones_like(flat))
        aux = (probabilities.sum(0) * counts.float()).sum() * (EXPERTS * AUX_COEFF / (TOP_K * tokens.shape[0] ** 2))
        order = torch.argsort(flat, stable=True)
        per_assignment = tokens.unsqueeze(1).expand(-1, TOP_K, -1).reshape(-1, HIDDEN)
        sorted_rows = per_assignment[order].to(torch.bfloat16)
        w1, w2 = self.w1.to(torch.bfloat16), self.w2.to(torch.bfloat16)
        if self.form == "grouped_mm":
            offsets = torch.cumsum(counts, 0).to(torch.int32)
            hidden = torch._grouped_mm(sorted_rows, w1, offs=offsets)
            gate, up = hidden.chunk(2, dim=-1)
            out = torch._grouped_mm((F.silu(gate) * up).contiguous(), w2, offs=offsets)
        else:
            parts, start = [], 0
            for expert, count in enumerate(counts.tolist()):
                rows = sorted_rows[start:start + count]
                gate, up = (rows @ w1[expert]).chunk(2, dim=-1)
                parts.append((F.silu(gate) * up) @ w2[expert])
                start += count
            out = torch.cat(parts)
        unsorted = torch.empty_like(out).index_copy(0, order, out)
        combined = (unsorted.view(-1, TOP_K, HIDDEN) * weights.unsqueeze(-1).to(out.dtype)).sum(1)
        return combined.view_as(x), aux


class Block(torch.nn.Module):
    def __init__(self, layers, form):
        super().__init__()
        d = HIDDEN // HEADS
        self.qkv = torch.nn.Linear(HIDDEN, (HEADS + 2 * GROUPS) * d, bias=False)
        self.proj = torch.nn.Linear(HEADS * d, HIDDEN, bias=False)
        torch.nn.init.normal_(self.qkv.weight, 0.0, STD)
        torch.nn.init.normal_(self.proj.weight, 0.0, STD / (2 * layers) ** 0.5)
        self.norm1 = torch.nn.RMSNorm(HIDDEN, eps=1e-5)
        self.norm2 = torch.nn.RMSNorm(HIDDEN, eps=1e-5)
        self.experts = Experts(layers, form)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        d = HIDDEN // HEADS
        q, k, v = self.qkv(self.norm1(x)).split([HEADS * d, GROUPS * d, GROUPS * d], dim=-1)
        q, k, v = (t.view(b, s, -1, d).transpose(1, 2) for t in (q, k, v))

        def rotate(t):
            first, second = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-second, first), dim=-1) * sin

        attention = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True, enable_gqa=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, s, HIDDEN))
        out, aux = self.experts(self.norm2(x))
        return x + out, aux


class MoeModel(torch.nn.Module):
    def __init__(self, layers, form):
        super().__init__()
        self.embedding = torch.nn.Parameter(torch.randn(VOCAB, HIDDEN) * STD)
        self.output = torch.nn.Parameter(torch.randn(VOCAB, HIDDEN) * STD)
        self.blocks = torch.nn.ModuleList(Block(layers, form) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(HIDDEN, eps=1e-5)
        d = HIDDEN // HEADS
        inverse = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(SEQ).float(), inverse)
        self.register_buffer("cos", torch.cat((angles.cos(), angles.cos()), dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat((angles.sin(), angles.sin()), dim=-1), persistent=False)

    def forward(self, tokens, labels):
        x = self.embedding[tokens]
        aux_total = 0.0
        for block in self.blocks:
            x, aux = block(x, self.cos, self.sin)
            aux_total = aux_total + aux
        logits = F.linear(self.norm(x), self.output).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1)) + aux_total


def builder(layers, form):
    def build(preset, capturable):
        torch.manual_seed(1234)
        model = MoeModel(layers, form).cuda()
        if capturable:
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, capturable=True,
                                          foreach=True)
        else:
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)
        generator = torch.Generator(device="cuda").manual_seed(1234)
        data = torch.randint(0, VOCAB, (16, MICRO, SEQ + 1), device="cuda", generator=generator)
        return model, optimizer, data, MICRO * SEQ
    return build


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("reference_moe.py needs a CUDA GPU")
    modes = (("eager (grouped_mm)", "grouped_mm", reference_pytorch.time_eager),
             ("eager (expert loop)", "loop", reference_pytorch.time_eager),
             ("full_iteration (grouped_mm)", "grouped_mm", reference_pytorch.time_full_iteration),
             ("compile (grouped_mm, no cudagraph trees)", "grouped_mm",
              lambda p, i, w: reference_pytorch.time_compiled(p, i, w, trees=False)))
    rows = []
    for name, form, runner in modes:
        reference_pytorch.build = builder(args.layers, form)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            times, host_times, pipelined, loss, tokens, capture, counts = runner("moe-1b", args.iters, args.warmup)
        except Exception as error:  # a mode that fails here is reported, not fatal
            print(f"reference: {name} failed on moe-1b: {type(error).__name__}: {str(error)[:400]}", file=sys.stderr)
            continue
        rows.append({"impl": "pytorch " + name, "ms_per_iter": statistics.median(times),
                     "pipelined_ms_per_iter": pipelined, "host_ms_per_iter": statistics.median(host_times),
                     "ops_per_iter": counts["ops"], "kernels_per_iter": counts["kernels"],
                     "tokens_per_s": tokens / (pipelined / 1000), "capture_s": capture,
                     "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
                     "reserved_mib": torch.cuda.memory_reserved() / 2**20, "loss": loss, "preset": "moe-1b",
                     "layers": args.layers, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                     "iters": args.iters, "warmup": args.warmup})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| impl | ms/iter | pipelined ms/iter | host ms/iter | tokens/s | capture s | peak MiB | loss |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['impl']} | {r['ms_per_iter']:.3f} | {r['pipelined_ms_per_iter']:.3f} | "
              f"{r['host_ms_per_iter']:.3f} | {r['tokens_per_s']:.0f} | {r['capture_s']:.2f} | "
              f"{r['peak_mib']:.1f} | {r['loss']:.4f} |")


if __name__ == "__main__":
    main()
