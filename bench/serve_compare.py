#!/usr/bin/env python3
"""bench/serve_compare.py DIR — the serving figures of one scripts/gpu-check run, side by side, from the
JSON files it wrote into DIR:

  serve-prefill-2000.json    graphed bench --serve: one request, a 2,000-token prompt (time to first token)
  serve-decode-32.json       one request, a 32-token prompt, 256 new tokens (time per output token)
  serve-decode-4000.json     the same after a 4,000-token prompt
  serve-512-r{16,64,256}.json  512 requests, prompts 64..2048, outputs 32..512, all at once, at
                             --inference-max-requests 16 / 64 / 256
  serve-prefix-{off,on}.json 256 requests behind one 1,024-token prompt prefix, without and with prefix sharing
  reference-prefill-2000.json, reference-serve-512.json  bench/serve_reference.py on the same workloads

Prints markdown tables and the issue's ratios; a missing file is reported as missing. Never fails on speed.
"""
import json
import os
import sys


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        print(f"{name}: unreadable ({error})")
        return None


def ratio(numerator, denominator):
    return f"{numerator / denominator:.2f}x" if numerator and denominator else "-"


def reference_path(reference, name):
    for path in (reference or {}).get("paths", []):
        if path.get("path") == name and "failed" not in path:
            return path
    return None


def latency_table(folder):
    prefill = load(folder, "serve-prefill-2000.json")
    short = load(folder, "serve-decode-32.json")
    long = load(folder, "serve-decode-4000.json")
    forward = reference_path(load(folder, "reference-prefill-2000.json"), "forward")
    print("| measure | graphed | reference | ratio |\n|---|---|---|---|")
    if prefill:
        reference_ms = forward["ttft_ms_p50"] if forward else None
        print(f"| time to first token, 2,000-token prompt (ms) | {prefill['ttft_ms_p50']:.2f} | "
              f"{reference_ms and f'{reference_ms:.2f}' or '-'} (transformers forward) | {ratio(prefill['ttft_ms_p50'], reference_ms)} |")
    if short and long:
        print(f"| time per output token after 32 / 4,000 prompt tokens (ms) | {short['tpot_ms_p50']:.3f} / "
              f"{long['tpot_ms_p50']:.3f} | - | {ratio(long['tpot_ms_p50'], short['tpot_ms_p50'])} |")


def throughput_table(folder):
    reference = load(folder, "reference-serve-512.json")
    print("\n| engine | max requests | output tok/s | req/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | graph / eager "
          "(unmatched) steps | preemptions | peak blocks |\n|---|---|---|---|---|---|---|---|---|")
    best = None
    for path in (reference or {}).get("paths", []):
        if "failed" in path:
            print(f"| transformers {path.get('path')} | - | failed: {path['failed']} | | | | | | |")
            continue
        best = max(best or 0, path["output_tokens_per_second"])
        print(f"| transformers {path['path']} | - | {path['output_tokens_per_second']:.0f} | {path['requests_per_second']:.2f} | "
              f"{path['ttft_ms_p50']:.0f} / {path['ttft_ms_p99']:.0f} | {path['tpot_ms_p50']:.1f} / {path['tpot_ms_p99']:.1f} "
              f"| - | - | - |")
    ours = None
    for requests in (16, 64, 256):
        run = load(folder, f"serve-512-r{requests}.json")
        if not run:
            print(f"| graphed | {requests} | missing | | | | | | |")
            continue
        engine = run["engine"]
        ours = max(ours or 0, run["output_tokens_per_second"])
        print(f"| graphed | {requests} | {run['output_tokens_per_second']:.0f} | {run['requests_per_second']:.2f} | "
              f"{run['ttft_ms_p50']:.0f} / {run['ttft_ms_p99']:.0f} | {run['tpot_ms_p50']:.1f} / {run['tpot_ms_p99']:.1f} | "
              f"{engine['graph_steps']} / {engine['eager_steps']} ({engine['unmatched_steps']}) | {engine['preemptions']} | "
              f"{engine['peak_blocks']} of {engine['blocks']} |")
    print(f"\ngraphed's best output tokens/s against transformers' best path: {ratio(ours, best)}")


def prefix_table(folder):
    rows = [(name, load(folder, f"serve-prefix-{name}.json")) for name in ("off", "on")]
    if not any(run for _, run in rows):
        return
    print("\n| prefix sharing (256 requests, a shared 1,024-token prompt prefix) | output tok/s | TTFT p50 / p99 ms | "
          "prompt tokens shared | peak blocks |\n|---|---|---|---|---|")
    for name, run in rows:
        if not run:
            print(f"| {name} | missing | | | |")
            continue
        engine = run["engine"]
        print(f"| {name} | {run['output_tokens_per_second']:.0f} | {run['ttft_ms_p50']:.0f} / {run['ttft_ms_p99']:.0f} | "
              f"{engine.get('shared_prompt_tokens', 0)} | {engine['peak_blocks']} of {engine['blocks']} |")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: serve_compare.py DIR")
    latency_table(sys.argv[1])
    throughput_table(sys.argv[1])
    prefix_table(sys.argv[1])


if __name__ == "__main__":
    main()
