#!/usr/bin/env python3
"""bench/compare_learning.py MODEL.jsonl DENSE.jsonl — does a model learn like the dense one? Two
`graphed train --metrics-file` runs on the same corpus, seed and tokens per step (log interval 1): a
Mamba-hybrid preset against the dense preset of its sizes (issue 14: hybrid-small against small).

The measure:
  - both learn: the mean of the last 10 losses is below the first loss by more than 2 nats;
  - the model's last-10 mean is at most 1.15 x the dense model's (it learns about as well).
Prints a markdown table (losses every 25 steps) and exits 1 when a criterion fails."""
import sys

from metrics_file import losses


def main():
    model, dense = losses(sys.argv[1]), losses(sys.argv[2])
    steps = min(len(model), len(dense))
    if steps < 20:
        print(f"compare_learning: only {steps} steps in common; expected 200 (log interval 1)")
        return 1
    tail = {name: sum(run[steps - 10:steps]) / 10 for name, run in (("model", model), ("dense", dense))}
    learned = {name: run[0] - tail[name] for name, run in (("model", model), ("dense", dense))}
    checks = [("both learn (last-10 mean below step 1 by > 2)", min(learned.values()) > 2.0),
              ("model's last-10 mean <= 1.15 x dense", tail["model"] <= 1.15 * tail["dense"])]
    print("| step | model loss | dense loss |\n|---|---|---|")
    for step in sorted({0, *range(24, steps, 25), steps - 1}):
        print(f"| {step + 1} | {model[step]:.4f} | {dense[step]:.4f} |")
    print(f"| last-10 mean | {tail['model']:.4f} | {tail['dense']:.4f} |")
    for name, passed in checks:
        print(f"| {name} | {'yes' if passed else 'NO'} | |")
    return 0 if all(passed for _, passed in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
