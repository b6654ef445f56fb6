#!/usr/bin/env python3
"""bench/compare_losses.py FUSED.jsonl ATEN.jsonl — compares two `graphed train --metrics-file` runs of the
same model, seed and data (log interval 1): the fused path against the ATen path (--no-fused-kernels).

The measure of "within bf16 noise": the two paths round differently (bf16 logits, fused norms, GEMM
gradients in fp32), so the losses differ from the first step and training's chaos amplifies it.
  - step 1: |fused - aten| / aten, before any update differs (<= 1e-2: a few bf16 roundings);
  - the last 50 steps: mean |fused - aten| / mean aten (<= 2e-2);
  - both runs learn: the mean of the last 10 losses is below the first loss by more than 2 nats.
Prints a markdown table and exits 1 when a criterion fails."""
import sys

from metrics_file import losses


def main():
    fused, aten = losses(sys.argv[1]), losses(sys.argv[2])
    steps = min(len(fused), len(aten))
    if steps < 60:
        print(f"compare_losses: only {steps} steps in common; expected 200 (log interval 1)")
        return 1
    first = abs(fused[0] - aten[0]) / aten[0]
    tail = range(steps - 50, steps)
    tail_difference = sum(abs(fused[i] - aten[i]) for i in tail) / sum(aten[i] for i in tail)
    worst = max(abs(fused[i] - aten[i]) / aten[i] for i in range(steps))
    learned = {name: run[0] - sum(run[steps - 10:steps]) / 10 for name, run in (("fused", fused), ("aten", aten))}
    checks = [("step 1 relative difference <= 1e-2", first <= 1e-2),
              ("last 50 steps mean relative difference <= 2e-2", tail_difference <= 2e-2),
              ("both learn (last-10 mean below step 1 by > 2)", min(learned.values()) > 2.0)]
    print(f"| measure | value |\n|---|---|\n| steps | {steps} |")
    print(f"| loss at step 1, fused / ATen | {fused[0]:.4f} / {aten[0]:.4f} |")
    print(f"| loss at step {steps}, fused / ATen | {fused[steps - 1]:.4f} / {aten[steps - 1]:.4f} |")
    print(f"| step 1 relative difference | {first:.2e} |")
    print(f"| last 50 steps, mean relative difference | {tail_difference:.2e} |")
    print(f"| largest relative difference, any step | {worst:.2e} |")
    print(f"| learned (step 1 - last-10 mean), fused / ATen | {learned['fused']:.3f} / {learned['aten']:.3f} |")
    for name, passed in checks:
        print(f"| {name} | {'yes' if passed else 'NO'} |")
    return 0 if all(passed for _, passed in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
