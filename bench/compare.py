#!/usr/bin/env python3
"""bench/compare.py — merges `graphed bench --json` and `reference_pytorch.py --json` outputs of one
run into a markdown table, preset by preset, with our time over PyTorch's.
Usage: python3 bench/compare.py LOG_DIR   (reads bench-<preset>.json and reference-<preset>.json)"""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return []


def main():
    log_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    presets = sorted({os.path.basename(p)[len("bench-"):-len(".json")] for p in glob.glob(os.path.join(log_dir, "bench-*.json"))},
                     key=lambda p: ["tiny", "small", "moe-small", "gpt-125m", "llama-1b"].index(p) if p in
                     ["tiny", "small", "moe-small", "gpt-125m", "llama-1b"] else 99)
    print("| preset | impl | ms/iter | host ms/iter | aten ops/iter | tokens/s | vs PyTorch eager | vs PyTorch full-iteration graph | capture s | peak MiB | reserved MiB | loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for preset in presets:
        ours = load(os.path.join(log_dir, f"bench-{preset}.json"))
        reference = load(os.path.join(log_dir, f"reference-{preset}.json"))
        by_impl = {row["impl"]: row for row in reference}
        eager = by_impl.get("pytorch eager")
        graph = by_impl.get("pytorch full_iteration")
        for row in reference + ours:
            name = row["impl"] if row["impl"].startswith("pytorch") else "graphed " + row["impl"]
            ratio_eager = f"{row['ms_per_iter'] / eager['ms_per_iter']:.2f}x" if eager else "-"
            ratio_graph = f"{row['ms_per_iter'] / graph['ms_per_iter']:.2f}x" if graph else "-"
            capture = row.get("capture_s", 0.0)
            print(f"| {preset} | {name} | {row['ms_per_iter']:.3f} | {row.get('host_ms_per_iter', 0):.3f} | {row.get('ops_per_iter', 0) or '-'} | {row['tokens_per_s']:,.0f} | {ratio_eager} | "
                  f"{ratio_graph} | {capture:.2f} | {row['peak_mib']:.1f} | {row.get('reserved_mib', 0):.1f} | {row['loss']:.4f} |")


if __name__ == "__main__":
    main()
