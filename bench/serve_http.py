#!/usr/bin/env python3
"""bench/serve_http.py — the workload of `graphed bench --serve --json`, sent over HTTP to `graphed serve`, so that
the server's throughput and latency sit beside the engine's own for the same requests on the same GPU.

  save-model  writes the workload's model shape as a random bf16 LlamaForCausalLM Hugging Face folder
              (transformers' save_pretrained; the same model bench/serve_reference.py builds), for `graphed serve --hf`.
  run         sends every request to POST /v1/completions at its arrival time (all at once when every arrival is 0),
              one connection each (aiohttp), as token ids (random, seeded by the workload's seed), greedy, ignore_eos,
              max_tokens = its output length, streamed with stream_options.include_usage. TTFT: arrival to the first
              chunk with text; TPOT: (last chunk - first chunk) / (output tokens - 1), the token count from the usage.
              A byte can be held back until its character completes, so a chunk may carry several tokens: both times
              are as a client sees them. p50 / p99 by nearest rank, as graphed reports them. With --compare BENCH_JSON
              (bench --serve's output for the same workload) it prints both and HTTP's share of the throughput.
Usage: python3 bench/serve_http.py save-model --workload FILE --out DIR
       python3 bench/serve_http.py run --workload FILE --base http://127.0.0.1:PORT --model ID [--compare BENCH_JSON]
       [--max-seconds 600] [--json]
"""
import argparse
import asyncio
import json
import math
import sys
import time


def load_workload(path):
    with open(path) as handle:
        workload = json.load(handle)["workload"]
    for name in ("prompt_lengths", "output_lengths", "arrival_seconds", "seed"):
        if name not in workload:
            raise SystemExit(f"serve_http.py: {path} has no workload.{name}; give the JSON of graphed bench --serve --json")
    return workload


def load_bench(path):
    with open(path) as handle:
        return json.load(handle)


def percentile(values, fraction):
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def make_prompts(workload, vocabulary):
    import torch
    generator = torch.Generator().manual_seed(workload["seed"])
    return [torch.randint(0, vocabulary, (length,), generator=generator).tolist() for length in workload["prompt_lengths"]]


def save_model(args):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import serve_reference  # the same random model the reference benchmarks
    with open(args.workload) as handle:
        shape = json.load(handle)["model_shape"]
    model = serve_reference.build_model(shape)
    model.save_pretrained(args.out)
    print(f"serve_http.py: wrote a random {shape['num_layers']}-layer LlamaForCausalLM to {args.out}")


async def one_request(session, base, model, prompt, output_length, arrival, start, deadline):
    await asyncio.sleep(max(0.0, start + arrival - time.perf_counter()))
    if time.perf_counter() > deadline:
        return None
    sent = time.perf_counter()
    body = {"model": model, "prompt": prompt, "max_tokens": output_length, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    first = last = None
    tokens = 0
    async with session.post(f"{base}/v1/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {(await response.text())[:300]}")
        buffer = b""
        async for piece in response.content.iter_any():
            buffer += piece
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                if not block.startswith(b"data: ") or block == b"data: [DONE]":
                    continue
                event = json.loads(block[6:])
                if "error" in event:
                    raise RuntimeError(event["error"]["message"])
                if event.get("usage"):
                    tokens = event["usage"]["completion_tokens"]
                if any(choice.get("text") for choice in event.get("choices", [])):
                    last = time.perf_counter()
                    first = first or last
    return {"ttft_ms": (first - sent) * 1000 if first else 0.0,
            "tpot_ms": (last - first) * 1000 / (tokens - 1) if first and tokens > 1 else None,
            "tokens": tokens, "end": time.perf_counter()}


async def run_all(args, workload, prompts):
    import aiohttp
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + args.max_seconds
        tasks = [one_request(session, args.base, args.model, prompt, output, arrival, start, deadline)
                 for prompt, output, arrival in zip(prompts, workload["output_lengths"], workload["arrival_seconds"])]
        results = [result for result in await asyncio.gather(*tasks) if result is not None]
    seconds = max(result["end"] for result in results) - start
    tokens = sum(result["tokens"] for result in results)
    tpots = [result["tpot_ms"] for result in results if result["tpot_ms"] is not None]
    ttfts = [result["ttft_ms"] for result in results]
    return {"path": "http", "requests": len(results), "output_tokens": tokens, "seconds": seconds,
            "output_tokens_per_second": tokens / seconds, "requests_per_second": len(results) / seconds,
            "ttft_ms_p50": percentile(ttfts, 0.5), "ttft_ms_p99": percentile(ttfts, 0.99),
            "tpot_ms_p50": percentile(tpots, 0.5), "tpot_ms_p99": percentile(tpots, 0.99),
            "note": f"{len(results)} of {len(prompts)} requests, one connection each, streamed"}


def print_comparison(http, bench):
    print("| path | requests | output tok/s | req/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms |")
    print("|---|---|---|---|---|---|")
    rows = [("graphed serve over HTTP", http)]
    if bench:
        rows.insert(0, ("graphed bench --serve (in process)", bench))
    for name, row in rows:
        print(f"| {name} | {row['requests']} | {row['output_tokens_per_second']:.0f} | {row['requests_per_second']:.2f} | "
              f"{row['ttft_ms_p50']:.0f} / {row['ttft_ms_p99']:.0f} | {row['tpot_ms_p50']:.1f} / {row['tpot_ms_p99']:.1f} |")
    if bench:
        share = http["output_tokens_per_second"] / bench["output_tokens_per_second"]
        print(f"\nHTTP keeps {share * 100:.1f}% of the in-process throughput (costs {(1 - share) * 100:.1f}%; target < 10%)")


def run(args):
    with open(args.workload) as handle:
        whole = json.load(handle)
    workload = whole["workload"]
    prompts = make_prompts(workload, int(whole["model_shape"]["vocab_size"]))
    http = asyncio.run(run_all(args, workload, prompts))
    bench = load_bench(args.compare) if args.compare else None
    if args.json:
        print(json.dumps({"http": http, "bench": bench and {key: bench[key] for key in (
            "requests", "output_tokens_per_second", "requests_per_second", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
            "tpot_ms_p99")}}))
    else:
        print_comparison(http, bench)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    save = commands.add_parser("save-model")
    save.add_argument("--workload", required=True)
    save.add_argument("--out", required=True)
    send = commands.add_parser("run")
    send.add_argument("--workload", required=True)
    send.add_argument("--base", required=True)
    send.add_argument("--model", required=True)
    send.add_argument("--compare")
    send.add_argument("--max-seconds", type=float, default=600)
    send.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_workload(args.workload)
    save_model(args) if args.command == "save-model" else run(args)


if __name__ == "__main__":
    main()
