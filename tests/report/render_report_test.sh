#!/usr/bin/env bash
# tests/report/render_report_test.sh — renders a `graphed report` page in headless Chromium and checks
# the screenshot shows the charts (size, many colours, each run's and each bench source's colour).
# Usage: render_report_test.sh GRAPHED_BINARY WORK_DIR   (ctest: report_render, label cpu)
# The screenshot stays at WORK_DIR/report.png for a look. Fails (never skips) without Chromium.
set -euo pipefail
graphed=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
fixtures="$here/fixtures"

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "FAIL: chromium is not installed, so the report cannot be rendered; fix: run scripts/setup (it installs chromium)" >&2
  exit 1
fi

rm -rf "$work"
mkdir -p "$work"
summary=$("$graphed" report "$fixtures/run-a" "$fixtures/run-b.jsonl" "$fixtures/bench-tiny.json" \
  "$fixtures/reference-tiny.json" -o "$work/report.html")
echo "$summary"
expected="report: wrote $work/report.html (2 runs, 2 bench files, 6 charts)"
if [ "$summary" != "$expected" ]; then
  echo "FAIL: summary line was '$summary', expected '$expected'" >&2
  exit 1
fi

# A profile of its own, so parallel runs and a user's Chromium do not interfere.
timeout 120 "$chromium" --headless --disable-gpu --no-sandbox --disable-dev-shm-usage --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1200,1600 --screenshot="$work/report.png" \
  "file://$work/report.html" >"$work/chromium.log" 2>&1 || {
  echo "FAIL: chromium did not render the report (log: $work/chromium.log)" >&2
  tail -5 "$work/chromium.log" >&2
  exit 1
}
if [ ! -s "$work/report.png" ]; then
  echo "FAIL: chromium wrote no screenshot (log: $work/chromium.log)" >&2
  exit 1
fi
# Run colours (#1f77b4 run-a, #d62728 run-b) and the PyTorch reference bars (#ff7f0e).
python3 "$here/check_png.py" "$work/report.png" --min-bytes 40000 --min-colors 200 \
  --color '#1f77b4' --color '#d62728' --color '#ff7f0e'
echo "report_render: ok ($work/report.png)"
