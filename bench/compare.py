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

ORDER = ["tiny", "small", "moe-small", "gpt-125m", "llama-1b"]


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


def main():
    log_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    presets = presets_in(log_dir)
    all_rows(log_dir, presets)
    per_layer_ratios(log_dir, presets)
    baseline(log_dir, presets)


if __name__ == "__main__":
    main()
