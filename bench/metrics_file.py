"""bench/metrics_file.py — reads a `graphed train --metrics-file` JSON-lines file: the loss of each logged
iteration, in iteration order (the compare_*.py scripts share it)."""
import json


def losses(path):
    found = {}
    with open(path) as handle:
        for line in handle:
            record = json.loads(line)
            if "loss" in record:
                found[record["iteration"]] = record["loss"]
    return [found[i] for i in sorted(found)]
