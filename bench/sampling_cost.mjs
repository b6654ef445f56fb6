// bench/sampling_cost.mjs — what sampling costs a CPU server against greedy (issue 42): `graphed serve` on the CPU,
// then N concurrent whole completions of T tokens each, greedy, at temperature 1 (OpenAI's default) and with top-p
// 0.9 too, taken in turn R times (the median run's time counts, the faults of all), and one sampled request alone; for each, the wall
// time, and the server's minor page faults and CPU seconds (from /proc/PID/stat) per drawn token. Usage:
//   node bench/sampling_cost.mjs GRAPHED MODEL_DIR [--requests 50] [--tokens 32] [--repeat 3] [--json]
// MODEL_DIR: a Hugging Face folder, e.g. the server tests' tiny Llama with GPT-2's 50,257-id vocabulary
// (build/tests/serve-model/tiny-llama, written by ctest's serve_model_setup). Reports; never fails on speed.
import fs from 'node:fs';
import { startServer } from '../tests/serve/server_process.mjs';

const [graphed, modelDir, ...rest] = process.argv.slice(2);
if (!graphed || !modelDir) {
  console.error('usage: node bench/sampling_cost.mjs GRAPHED MODEL_DIR [--requests 50] [--tokens 32] [--json]');
  process.exit(2);
}
const option = (name, fallback) => {
  const at = rest.indexOf(name);
  return at >= 0 ? Number(rest[at + 1]) : fallback;
};
const requests = option('--requests', 50);
const tokens = option('--tokens', 32);
const repeat = option('--repeat', 3);
const asJson = rest.includes('--json');

/** The server's minor page faults and user and system seconds so far. */
function usage(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');  // fields 3 onwards
  const ticks = 100;  // USER_HZ on Linux
  return { minorFaults: Number(fields[7]), user: Number(fields[11]) / ticks, system: Number(fields[12]) / ticks };
}

async function run(server, name, count, temperature, topP = 1.0) {
  const before = usage(server.pid);
  const started = Date.now();
  const bodies = await Promise.all(Array.from({ length: count }, (_, i) =>
    fetch(`${server.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: `Request ${i} says`, max_tokens: tokens, temperature, top_p: topP, seed: i,
                             ignore_eos: true }),
    }).then((response) => response.json())));
  const seconds = (Date.now() - started) / 1000;
  const after = usage(server.pid);
  const drawn = bodies.reduce((sum, body) => sum + (body.usage?.completion_tokens ?? 0), 0);
  if (drawn !== count * tokens) throw new Error(`${name}: ${drawn} tokens, wanted ${count * tokens}: ${JSON.stringify(bodies[0])}`);
  return { name, requests: count, tokens: drawn, seconds, tokens_per_second: drawn / seconds,
           minor_faults: after.minorFaults - before.minorFaults, faults_per_token: (after.minorFaults - before.minorFaults) / drawn,
           user_seconds: after.user - before.user, system_seconds: after.system - before.system };
}

/** The run of median time, with the faults and CPU seconds of every run summed (their tokens too). */
function median(runs) {
  const sorted = [...runs].sort((a, b) => a.seconds - b.seconds);
  const middle = { ...sorted[Math.floor(sorted.length / 2)] };
  for (const key of ['tokens', 'minor_faults', 'user_seconds', 'system_seconds']) {
    middle[key] = runs.reduce((sum, run) => sum + run[key], 0);
  }
  middle.faults_per_token = middle.minor_faults / middle.tokens;
  middle.tokens_per_second = (middle.tokens / runs.length) / middle.seconds;
  middle.runs = runs.length;
  return middle;
}

const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', String(Math.max(requests, 1))]);
let rows;
try {
  await run(server, 'warmup', 4, 1.0);
  await run(server, 'warmup', 4, 0.0);
  const greedyRuns = [], sampledRuns = [], filteredRuns = [];
  for (let i = 0; i < repeat; ++i) {
    greedyRuns.push(await run(server, 'greedy', requests, 0.0));
    sampledRuns.push(await run(server, 'temperature 1', requests, 1.0));
    filteredRuns.push(await run(server, 'temperature 1, top-p 0.9', requests, 1.0, 0.9));
  }
  rows = [median(greedyRuns), median(sampledRuns), median(filteredRuns),
          await run(server, 'temperature 1, alone', 1, 1.0)];
} finally {
  await server.stop();
}
const [greedy, sampled] = rows;
const filtered = rows[2];
const ratios = { seconds: sampled.seconds / greedy.seconds, top_p_seconds: filtered.seconds / greedy.seconds,
                 faults_per_token: sampled.faults_per_token / Math.max(greedy.faults_per_token, 1 / greedy.tokens) };
if (asJson) {
  console.log(JSON.stringify({ requests, tokens, rows, sampled_over_greedy: ratios }));
} else {
  console.log(`graphed serve on the CPU, ${modelDir}: ${requests} concurrent completions of ${tokens} tokens ` +
              `(greedy and sampled taken in turn ${repeat} times: the median time; faults and CPU seconds of all runs)`);
  console.log('| workload | runs | requests | tokens | seconds | tokens/s | minor faults | faults/token | user s | system s |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) {
    console.log(`| ${row.name} | ${row.runs ?? 1} | ${row.requests} | ${row.tokens} | ${row.seconds.toFixed(2)} | ${row.tokens_per_second.toFixed(0)} | ` +
                `${row.minor_faults} | ${row.faults_per_token.toFixed(2)} | ${row.user_seconds.toFixed(2)} | ${row.system_seconds.toFixed(2)} |`);
  }
  console.log(`sampled / greedy: ${ratios.seconds.toFixed(2)}x the time, ${ratios.faults_per_token.toFixed(2)}x the faults ` +
              `per token; with top-p 0.9: ${ratios.top_p_seconds.toFixed(2)}x the time`);
}
