#!/usr/bin/env bash
# tests/test_names_test.sh BUILD_DIR — every ctest name fits 150 characters, so that ctest's lines (the name padded
# with dots, then the time) read in a terminal; a parameter's printed value once made them 388 wide.
set -euo pipefail
cd "$1"
names=$(ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$names" ] || { echo "ctest -N listed no tests"; exit 1; }
long=$(awk 'length($0) > 150' <<<"$names")
if [ -n "$long" ]; then
  echo "ctest names longer than 150 characters:"
  echo "$long"
  exit 1
fi
echo "ok - $(wc -l <<<"$names") test names, the longest $(awk '{ print length($0) }' <<<"$names" | sort -n | tail -1) characters"
