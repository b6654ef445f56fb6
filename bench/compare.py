#!/usr/bin/env python3
"""bench/compare.py — merges `graphed bench --json` and `reference_pytorch.py --json` outputs of one
run into markdown tables, preset by preset: every row with our time over PyTorch's (synchronized and
pipelined), then the per-layer rows against graphed's full_iteration and the reserved memory against
eager. With bench-baseline-<preset>.json files (gpu-check's GRAPHED_BASELINE_DIR), a last table sets
the baseline build's rows beside this build's.
Usage: python3 bench/compare.py LOG_DIR   (reads bench-<preset>.json and reference-<preset>.json)"""
import glob
import json
import os
import sys

ORDER = ["tiny", "small", "moe-small", "hybrid-small", "gpt-125m", "llama-1b"]


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return []


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def presets_in(log_dir):
    found = {os.path.basename(p)[len("bench-"):-len(".json")] for p in glob.glob(os.path.join(log_dir, "bench-*.json"))}
    found = {p for p in found if not p.startswith(("baseline-", "refactor-"))}
    return sorted(found, key=lambda p: ORDER.index(p) if p in ORDER else 99)


def all_rows(log_dir, presets):
    print("| preset | impl | ms/iter | pipelined ms/iter | host ms/iter | aten ops/iter | tokens/s | vs PyTorch eager | "
          "vs PyTorch full-iteration graph (sync / pipelined) | capture s | peak MiB | reserved MiB | loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for preset in presets:
        ours = load(os.path.join(log_dir, f"bench-{preset}.json"))
        reference = load(os.path.join(log_dir, f"reference-{preset}.json"))
        by_impl = {row["impl"]: row for row in reference}
        eager = by_impl.get("pytorch eager")
        graph = by_impl.get("pytorch full_iteration")
        for row in reference + ours:
            name = row["impl"] if row["impl"].startswith("pytorch") else "graphed " + row["impl"]
            pipelined = row.get("pipelined_ms_per_iter", 0.0)
            versus_graph = "-"
            if graph:
                versus_graph = (f"{ratio(row['ms_per_iter'], graph['ms_per_iter'])} / "
                                f"{ratio(pipelined, graph.get('pipelined_ms_per_iter', 0.0))}")
            print(f"| {preset} | {name} | {row['ms_per_iter']:.3f} | {pipelined:.3f} | {row.get('host_ms_per_iter', 0):.3f} | "
                  f"{row.get('ops_per_iter', 0) or '-'} | {row['tokens_per_s']:,.0f} | "
                  f"{ratio(row['ms_per_iter'], eager['ms_per_iter']) if eager else '-'} | {versus_graph} | "
                  f"{row.get('capture_s', 0.0):.2f} | {row['peak_mib']:.1f} | {row.get('reserved_mib', 0):.1f} | {row['loss']:.4f} |")


def per_layer_ratios(log_dir, presets):
    print()
    print("| preset | impl | ms/iter over full_iteration | pipelined over full_iteration | reserved MiB over none | "
          "graphs | graph pool MiB | graphs MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in presets:
        rows = {row["impl"]: row for row in load(os.path.join(log_dir, f"bench-{preset}.json"))}
        full, eager = rows.get("full_iteration"), rows.get("none")
        for name, row in rows.items():
            if not (name.startswith("local") or name.startswith("transformer_engine")):
                continue
            print(f"| {preset} | {name} | {ratio(row['ms_per_iter'], full['ms_per_iter']) if full else '-'} | "
                  f"{ratio(row.get('pipelined_ms_per_iter'), full.get('pipelined_ms_per_iter')) if full else '-'} | "
                  f"{ratio(row.get('reserved_mib'), eager.get('reserved_mib')) if eager else '-'} | {row.get('graphs', 0)} | "
                  f"{row.get('graph_pool_mib', 0):.1f} | {row.get('graph_mib', 0):.1f} |")


def baseline(log_dir, presets):
    paths = sorted(glob.glob(os.path.join(log_dir, "bench-baseline-*.json")))
    if not paths:
        return
    print()
    print("| preset | impl | baseline ms/iter | this build ms/iter | this / baseline | baseline host ms/iter | "
          "this build host ms/iter |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        preset = os.path.basename(path)[len("bench-baseline-"):-len(".json")]
        current = {row["impl"]: row for row in load(os.path.join(log_dir, f"bench-refactor-{preset}.json"))}
        for row in load(path):
            now = current.get(row["impl"])
            if not now:
                continue
            print(f"| {preset} | {row['impl']} | {row['ms_per_iter']:.3f} | {now['ms_per_iter']:.3f} | "
                  f"{ratio(now['ms_per_iter'], row['ms_per_iter'])} | {row.get('host_ms_per_iter', 0):.3f} | "
                  f"{now.get('host_ms_per_iter', 0):.3f} |")


def row_of(log_dir, prefix, preset, impl):
    for row in load(os.path.join(log_dir, f"{prefix}-{preset}.json")):
        if row.get("impl") == impl and "skipped" not in row:
            return row
    return None


def fused_against_aten(log_dir, presets):
    """graphed's fused path (bench-*.json) against the ATen path (--no-fused-kernels, aten-*.json)."""
    print()
    print("| preset | impl | fused ms/iter | ATen path ms/iter | fused / ATen | fused MFU | ATen MFU | fused reserved MiB | "
          "ATen reserved MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for preset in presets:
        for impl in ("none", "full_iteration+optimizer"):
            fused, aten = row_of(log_dir, "bench", preset, impl), row_of(log_dir, "aten", preset, impl)
            if not fused or not aten:
                continue
            mfu = lambda row: f"{100 * row['mfu']:.1f}%" if row.get("mfu") else "-"
            print(f"| {preset} | {impl} | {fused['pipelined_ms_per_iter']:.3f} | {aten['pipelined_ms_per_iter']:.3f} | "
                  f"{ratio(fused['pipelined_ms_per_iter'], aten['pipelined_ms_per_iter'])} | {mfu(fused)} | {mfu(aten)} | "
                  f"{fused.get('reserved_mib', 0):.0f} | {aten.get('reserved_mib', 0):.0f} |")


def targets(log_dir):
    """Issue 13's targets, each a ratio of rows of this run (pipelined times)."""
    def pipelined(row):
        return row.get("pipelined_ms_per_iter") if row else None

    def line(name, value, goal, met):
        print(f"| {name} | {value} | {goal} | {'met' if met else 'missed'} |")

    print()
    print("| target | this run | goal | verdict (both measures) |")
    print("|---|---|---|---|")
    def both(ours, theirs):  # synchronized median (the measure) and pipelined
        return ours["ms_per_iter"] / theirs["ms_per_iter"], pipelined(ours) / pipelined(theirs)

    full = row_of(log_dir, "bench", "gpt-125m", "full_iteration")
    compiled = row_of(log_dir, "reference", "gpt-125m", "pytorch compile (no cudagraph trees)")
    if full and compiled:
        synchronized, piped = both(full, compiled)
        line("gpt-125m full_iteration / torch.compile (no cudagraph trees), synchronized / pipelined",
             f"{synchronized:.2f}x / {piped:.2f}x ({full['ms_per_iter']:.2f} / {compiled['ms_per_iter']:.2f} ms; "
             f"{pipelined(full):.2f} / {pipelined(compiled):.2f} ms)", "<= 0.9x", max(synchronized, piped) <= 0.9)
    llama = row_of(log_dir, "bench", "llama-1b", "full_iteration+optimizer")
    llama_aten = row_of(log_dir, "aten", "llama-1b", "full_iteration+optimizer")
    if llama and llama.get("mfu"):
        line("llama-1b MFU (full_iteration+optimizer)", f"{100 * llama['mfu']:.1f}%", ">= 45%", llama["mfu"] >= 0.45)
    if llama and llama_aten:
        value = llama["tokens_per_s"] / llama_aten["tokens_per_s"]
        line("llama-1b tokens/s over the ATen path", f"{value:.2f}x ({llama['tokens_per_s']:,.0f} / "
             f"{llama_aten['tokens_per_s']:,.0f})", ">= 1.8x", value >= 1.8)
    moe, small = row_of(log_dir, "bench", "moe-small", "full_iteration"), row_of(log_dir, "bench", "small", "full_iteration")
    if moe and small:
        synchronized, piped = both(moe, small)
        line("moe-small / small, full_iteration, synchronized / pipelined", f"{synchronized:.2f}x / {piped:.2f}x",
             "<= 1.3x", max(synchronized, piped) <= 1.3)
    eager, torch_eager = row_of(log_dir, "bench", "tiny", "none"), row_of(log_dir, "reference", "tiny", "pytorch eager")
    if eager and torch_eager:
        synchronized, piped = both(eager, torch_eager)
        line("tiny none / PyTorch eager, synchronized / pipelined", f"{synchronized:.2f}x / {piped:.2f}x", "<= 0.6x",
             max(synchronized, piped) <= 0.6)
    none = row_of(log_dir, "bench", "gpt-125m", "none")
    torch_graph = row_of(log_dir, "reference", "gpt-125m", "pytorch full_iteration")
    if full and none:
        value = full["reserved_mib"] / none["reserved_mib"]
        line("gpt-125m full_iteration reserved / none reserved", f"{value:.2f}x ({full['reserved_mib']:.0f} / "
             f"{none['reserved_mib']:.0f} MiB)", "<= 1.1x", value <= 1.1)
    if full and torch_graph:
        line("gpt-125m full_iteration reserved / PyTorch full-iteration graph", f"{full['reserved_mib']:.0f} / "
             f"{torch_graph['reserved_mib']:.0f} MiB", "<=", full["reserved_mib"] <= torch_graph["reserved_mib"])


def main():
    log_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    presets = presets_in(log_dir)
    all_rows(log_dir, presets)
    per_layer_ratios(log_dir, presets)
    fused_against_aten(log_dir, presets)
    targets(log_dir)
    baseline(log_dir, presets)


if __name__ == "__main__":
    main()
