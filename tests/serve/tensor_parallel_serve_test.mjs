// tests/serve/tensor_parallel_serve_test.mjs — `graphed serve --tensor-model-parallel-size 2` as two ranks on
// the CPU (Gloo over 127.0.0.1, launched as torchrun would): rank 0 answers on HTTP and schedules, rank 1
// follows the steps it broadcasts, and their greedy completions equal one process's, for a graphed checkpoint
// and for a Hugging Face folder whose vocabulary (GPT-2's 50257 ids) the ranks pad to split. SIGTERM to rank 0
// stops both, each with exit code 0. A launch of two processes without tensor parallelism is refused.
// Usage: node tensor_parallel_serve_test.mjs GRAPHED WORK_DIR [HF_FOLDER]
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { check, startServer, trainSentenceModel } from './server_process.mjs';

const [graphed, work, hfFolder] = process.argv.slice(2);
const checkpoint = trainSentenceModel(graphed, work);

async function completions(base, model, prompts) {
  const texts = [];
  for (const prompt of prompts) {
    const response = await fetch(`${base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model, prompt, max_tokens: 20, temperature: 0 }),
    });
    const body = await response.text();
    check(response.status === 200, `completion of '${prompt}': status ${response.status}: ${body}`);
    texts.push(JSON.parse(body).choices[0].text);
  }
  return texts;
}

const rankEnv = (rank, port) => ({ ...process.env, WORLD_SIZE: '2', RANK: String(rank), LOCAL_RANK: String(rank),
                                   MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) });

/** A port of 127.0.0.1 that the system just handed out as free (a random pick can be a live ephemeral port). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => { const { port } = server.address(); server.close(() => resolve(port)); });
  });
}

/** Rank 1 following, then rank 0 ready, on one rendezvous port; `null` when another process took the port first. */
async function startRanks(arguments_) {
  const port = await freePort();
  const follower = spawn(graphed, ['serve', ...arguments_, '--host', '127.0.0.1', '--port', '0', '--json'],
                         { stdio: ['ignore', 'pipe', 'pipe'], env: rankEnv(1, port) });
  const ranks = { follower, output: '' };
  follower.stdout.on('data', (data) => { ranks.output += data; });
  follower.stderr.on('data', (data) => { ranks.output += data; });
  ranks.exit = new Promise((resolve) => follower.on('exit', (code) => resolve(code)));
  try {
    ranks.first = await startServer(graphed, arguments_, { env: rankEnv(0, port) });
    return ranks;
  } catch (error) {
    follower.kill('SIGKILL');
    if (String(error.message).includes('pick a free MASTER_PORT')) return null;
    throw error;
  }
}

/** One process, then two tensor-parallel ranks, serving `args`: the same greedy completions, a clean stop. */
async function compareServers(what, args, model, prompts) {
  const one = await startServer(graphed, args);
  const expected = await completions(one.base, model, prompts);
  check((await one.stop()) === 0, `${what}: the one-process server did not exit 0:\n${one.stderr()}`);
  const tensor = [...args, '--tensor-model-parallel-size', '2'];
  let ranks = null;
  for (let attempt = 0; attempt < 3 && ranks === null; ++attempt) ranks = await startRanks(tensor);
  check(ranks !== null, `${what}: three rendezvous ports in a row were taken by other processes`);
  try {
    const got = await completions(ranks.first.base, model, prompts);
    for (let i = 0; i < prompts.length; ++i) {
      check(got[i] === expected[i], `${what}, '${prompts[i]}': two tensor ranks wrote ${JSON.stringify(got[i])}, ` +
                                    `one process ${JSON.stringify(expected[i])}`);
    }
    console.log(`ok - ${what}: two tensor-parallel ranks complete as one process: ${JSON.stringify(expected)}`);
    check((await ranks.first.stop()) === 0, `${what}: rank 0 did not exit 0:\n${ranks.first.stderr()}`);
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), 60000); });
    const code = await Promise.race([ranks.exit, timeout]);
    clearTimeout(timer);
    check(code === 0, `${what}: rank 1 did not exit 0 after rank 0 stopped (${code}):\n${ranks.output}`);
    check(ranks.output === '', `${what}: rank 1 printed (rank 0 speaks for all):\n${ranks.output}`);
    console.log(`ok - ${what}: SIGTERM to rank 0 stops both ranks`);
  } finally {
    ranks.follower.kill('SIGKILL');
  }
}

const args = ['--load', checkpoint, '--device', 'cpu'];
await compareServers('a graphed checkpoint', args, 'run', ['The quick', 'over the', 'jumps', 'lazy dog. The']);
if (hfFolder) {  // GPT-2's vocabulary of 50257 ids does not split: the ranks pad it
  await compareServers('a Hugging Face folder', ['--hf', hfFolder, '--device', 'cpu'], path.basename(hfFolder),
                       ['The quick brown', 'Once upon a time', 'Hello']);
}

// Two processes that are not one tensor-parallel group would each serve alone: refused with the fix.
const refused = spawnSync(graphed, ['serve', ...args, '--port', '0'],
                          { encoding: 'utf8', env: rankEnv(0, await freePort()), timeout: 60000 });
check(refused.status === 1 && refused.stderr.includes('runs several only as one tensor-parallel group'),
      `a 2-process launch without tensor parallelism: status ${refused.status}:\n${refused.stderr}`);
console.log('ok - two processes without tensor parallelism are refused');
fs.rmSync(work, { recursive: true, force: true });
