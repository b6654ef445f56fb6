#!/usr/bin/env bash
# tests/serve/curl_test.sh — `graphed serve` of a graphed checkpoint (byte-level tokenizer, no chat
# template) driven by curl: health, models, a completion whole and streamed (server-sent events ending in
# [DONE]), chat refused with a 400 that says why, the errors of unknown paths and wrong methods as JSON,
# the metrics page, and exit 0 on SIGTERM.
# Usage: curl_test.sh GRAPHED WORK_DIR
set -euo pipefail
graphed=$1
work=$2
rm -rf "$work"
mkdir -p "$work"

fail() { echo "FAILED: $*" >&2; [ -f "$work/serve.err" ] && sed 's/^/  server: /' "$work/serve.err" >&2; exit 1; }

# A 1-layer byte-level model trained 2 iterations: what `graphed train --save` writes.
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 1 60) > "$work/text.txt"
"$graphed" train --data-path "$work/text.txt" --device cpu --num-layers 1 --hidden-size 32 --num-attention-heads 2 \
  --seq-length 32 --vocab-size 256 --train-iters 2 --log-interval 1 --eval-iters 0 --sample-tokens 0 \
  --save "$work/run" > "$work/train.log" 2>&1 || fail "training the test model: $(tail -3 "$work/train.log")"

"$graphed" serve --load "$work/run" --device cpu --port 0 --json > "$work/serve.out" 2> "$work/serve.err" &
server=$!
trap 'kill -9 $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  grep -q '"event":"ready"' "$work/serve.out" 2>/dev/null && break
  kill -0 $server 2>/dev/null || fail "graphed serve exited before it was ready"
  sleep 0.2
done
port=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["port"])' "$work/serve.out")
base="http://127.0.0.1:$port"
echo "ok - serving on $base"

request() {  # METHOD PATH [BODY]: prints the status line's code, then the body, into $work/response
  local method=$1 route=$2 body=${3:-}
  if [ -n "$body" ]; then
    curl -s -o "$work/response" -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' -d "$body" "$base$route"
  else
    curl -s -o "$work/response" -w '%{http_code}' -X "$method" "$base$route"
  fi
}
expect() {  # STATUS PATTERN WHAT: the last response had STATUS and its body matches PATTERN
  [ "$status" = "$1" ] || fail "$3: status $status, wanted $1: $(cat "$work/response")"
  grep -q -- "$2" "$work/response" || fail "$3: body does not match '$2': $(cat "$work/response")"
  echo "ok - $3"
}

status=$(request GET /health); expect 200 '"status":"ok"' "GET /health"
status=$(request GET /v1/models); expect 200 '"id":"run"' "GET /v1/models names the checkpoint folder"
status=$(request POST /v1/completions '{"model": "run", "prompt": "The quick", "max_tokens": 5, "temperature": 0}')
expect 200 '"object":"text_completion"' "POST /v1/completions"
grep -q '"completion_tokens":5' "$work/response" || grep -q '"finish_reason":"stop"' "$work/response" ||
  fail "completion usage: $(cat "$work/response")"

curl -s -N -H 'Content-Type: application/json' \
  -d '{"prompt": "The quick", "max_tokens": 5, "temperature": 0, "stream": true}' "$base/v1/completions" > "$work/stream"
[ "$(grep -c '^data: {' "$work/stream")" -ge 2 ] || fail "stream: too few events: $(cat "$work/stream")"
[ "$(tail -n 2 "$work/stream" | head -n 1)" = "data: [DONE]" ] || fail "stream: no [DONE] last: $(cat "$work/stream")"
echo "ok - POST /v1/completions with stream: server-sent events ending in [DONE]"

status=$(request POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}')
expect 400 'has no chat template' "chat without a template: 400"
status=$(request GET /v1/unknown); expect 404 '"type":"not_found_error"' "unknown path: 404 JSON"
status=$(request GET /v1/completions); expect 405 'use POST' "wrong method: 405 JSON"
status=$(request POST /v1/completions '{"prompt": '); expect 400 'not valid JSON' "malformed body: 400 JSON"
status=$(request GET /metrics); expect 200 'graphed_requests_total{outcome="completed"} 2' "GET /metrics counts the requests"

# Mistakes at start: each one line saying what and the fix, exit 1.
refused() {  # WHAT PATTERN ARGS...: graphed serve ARGS exits 1 with PATTERN on stderr
  local what=$1 pattern=$2
  shift 2
  local code=0
  "$graphed" serve "$@" > "$work/refused.out" 2> "$work/refused.err" || code=$?
  [ $code -eq 1 ] || fail "$what: exit $code, wanted 1: $(cat "$work/refused.err")"
  grep -q -- "$pattern" "$work/refused.err" || fail "$what: stderr lacks '$pattern': $(cat "$work/refused.err")"
  echo "ok - refused at start: $what"
}
refused "the port in use" "cannot listen on 127.0.0.1:$port" --load "$work/run" --device cpu --port "$port"
refused "a port out of range" "--port is 70000" --load "$work/run" --device cpu --port 70000
refused "no model" "--load\|--hf" --device cpu
refused "a chat template file that is missing" "--chat-template $work/missing.jinja cannot be read" --load "$work/run" \
  --device cpu --chat-template "$work/missing.jinja"

kill -TERM $server
code=0
wait $server || code=$?
trap - EXIT
[ $code -eq 0 ] || fail "exit $code after SIGTERM"
grep -q "^stopped:" "$work/serve.err" || fail "no 'stopped:' line after SIGTERM"
echo "ok - SIGTERM: exit 0"
