#!/usr/bin/env python3
"""Greedy agreement of FP8-weight decoding (--quantization fp8) with bf16 decoding of the same checkpoint.

Takes prompts from a text corpus (evenly spaced slices), runs `graphed generate --json` on them twice (bf16,
then --quantization fp8; greedy, --ignore-eos) and prints a Markdown table: the share of generated tokens that
match position by position, the share of prompts whose continuations are identical, and how many tokens the
two agree on before their first difference (mean and median).

usage: bench/fp8_agreement.py GRAPHED CHECKPOINT CORPUS [--prompts 32] [--prompt-chars 400] [--new-tokens 64]
"""
import argparse
import json
import statistics
import subprocess
import sys


def prompts_from(corpus, count, characters):
    text = open(corpus, encoding="utf-8", errors="replace").read()
    step = max(1, (len(text) - characters) // count)
    return [text[i * step:i * step + characters] for i in range(count)]


def generate(graphed, checkpoint, prompts, new_tokens, extra):
    command = [graphed, "generate", "--load", checkpoint, "--json", "--max-new-tokens", str(new_tokens),
               "--ignore-eos"] + extra
    for prompt in prompts:
        command += ["--prompt", prompt]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"graphed generate {' '.join(extra) or '(bf16)'} failed:\n{result.stderr[-2000:]}")
    return [item["ids"] for item in json.loads(result.stdout)["completions"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphed")
    parser.add_argument("checkpoint")
    parser.add_argument("corpus")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--prompt-chars", type=int, default=400)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    prompts = prompts_from(args.corpus, args.prompts, args.prompt_chars)
    bf16 = generate(args.graphed, args.checkpoint, prompts, args.new_tokens, [])
    fp8 = generate(args.graphed, args.checkpoint, prompts, args.new_tokens, ["--quantization", "fp8"])
    matching = sum(sum(1 for a, b in zip(x, y) if a == b) for x, y in zip(bf16, fp8))
    total = sum(len(x) for x in bf16)
    prefixes = []
    for x, y in zip(bf16, fp8):
        same = 0
        while same < min(len(x), len(y)) and x[same] == y[same]:
            same += 1
        prefixes.append(same)
    identical = sum(1 for x, y in zip(bf16, fp8) if x == y)
    print(f"{len(prompts)} prompts of {args.prompt_chars} characters from {args.corpus}, {args.new_tokens} greedy "
          "tokens each, FP8 weights against bf16:")
    print("| measure | value |\n|---|---|")
    print(f"| tokens equal position by position | {matching} / {total} ({100.0 * matching / max(1, total):.1f}%) |")
    print(f"| continuations identical | {identical} / {len(prompts)} |")
    print(f"| tokens before the first difference, mean / median | {statistics.mean(prefixes):.1f} / "
          f"{statistics.median(prefixes):.0f} |")


if __name__ == "__main__":
    main()
