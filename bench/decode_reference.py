#!/usr/bin/env python3
"""bench/decode_reference.py — transformers' own decoding of the same Llama-style model that
`graphed bench --decode --preset llama-1b` times, measured the same way, so ratios come from one run
on one GPU.

Rows, per batch size:
  transformers dynamic        model.generate with the default dynamic KV cache (eager PyTorch)
  transformers static+compile model.generate with cache_implementation="static" and the forward
                              compiled by torch.compile(mode="reduce-overhead") (CUDA graphs); only
                              with --compile, and reported as failed if it does not run

Model: LlamaForCausalLM, random bf16 weights (hidden 2048, 16 layers, 32 heads / 8 KV heads, SwiGLU
8192, vocab 32000, untied), greedy, a random prompt of --prompt-tokens tokens, --new-tokens new
tokens with eos disabled. ms/step = (time of generate with N new tokens - time with 1) / (N - 1):
the decode steps alone, as graphed reports them; first token ms = time with 1 new token. Median of 3.
Usage: python3 bench/decode_reference.py [--batches 1,8,32] [--compile] [--json]
"""
import argparse
import json
import statistics
import sys
import time

import torch


def build_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=32000, max_position_embeddings=2048,
                         tie_word_embeddings=False, rms_norm_eps=1e-5)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    return model


def timed_generate(model, prompts, new_tokens, **kwargs):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             eos_token_id=None, pad_token_id=0, **kwargs)
    torch.cuda.synchronize()
    assert out.shape[1] == prompts.shape[1] + new_tokens, out.shape
    return (time.perf_counter() - start) * 1000.0


def measure(model, batch, prompt_tokens, new_tokens, **kwargs):
    torch.manual_seed(batch)
    prompts = torch.randint(0, 32000, (batch, prompt_tokens), device="cuda")
    timed_generate(model, prompts, new_tokens, **kwargs)  # warmup (and compile)
    first, full = [], []
    for _ in range(3):
        first.append(timed_generate(model, prompts, 1, **kwargs))
        full.append(timed_generate(model, prompts, new_tokens, **kwargs))
    step_ms = (statistics.median(full) - statistics.median(first)) / (new_tokens - 1)
    return {"ms_per_step": step_ms, "tokens_per_s": batch / (step_ms / 1000.0),
            "first_token_ms": statistics.median(first)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--compile", action="store_true", help="also time static cache + torch.compile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("decode_reference: needs a CUDA device", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    model = build_model()
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    modes = [("transformers dynamic", {})]
    if args.compile:
        modes.append(("transformers static+compile", {"cache_implementation": "static"}))
    for name, kwargs in modes:
        if kwargs:
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        for batch in batches:
            row = {"mode": "decode", "scope": name, "batch": batch, "device": torch.cuda.get_device_name(),
                   "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens}
            try:
                row.update(measure(model, batch, args.prompt_tokens, args.new_tokens, **kwargs))
            except Exception as error:  # report, never fail the run on a reference that does not work
                row["skipped"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"decode_reference: transformers on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"prompt {args.prompt_tokens}, {args.new_tokens} new tokens, greedy, bf16, median of 3")
    print("| scope | batch | ms/step | tokens/s | first token ms |\n|---|---|---|---|---|")
    for row in rows:
        if "skipped" in row:
            print(f"| {row['scope']} | {row['batch']} | skipped: {row['skipped']} |||")
        else:
            print(f"| {row['scope']} | {row['batch']} | {row['ms_per_step']:.3f} | {row['tokens_per_s']:.0f} | "
                  f"{row['first_token_ms']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
