// tests/serve/server_process.mjs — starts `graphed serve` for a test on a free port of 127.0.0.1 (--port 0
// and the JSON ready line say which; `env`: its environment, a launcher's for a rank), and stops it with
// SIGTERM, returning its exit code; reads event streams and metrics; trains the small model some tests serve.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Trains a small byte-level model on one repeated sentence in `work` (emptied first; its greedy continuations are
 * far from ties and repeat the sentence) and returns its checkpoint folder, `work`/run. */
export function trainSentenceModel(graphed, work) {
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(path.join(work, 'text.txt'), 'The quick brown fox jumps over the lazy dog. '.repeat(80));
  const checkpoint = path.join(work, 'run');
  const trained = spawnSync(graphed, ['train', '--data-path', path.join(work, 'text.txt'), '--device', 'cpu',
    '--num-layers', '2', '--hidden-size', '64', '--num-attention-heads', '4', '--seq-length', '64', '--vocab-size',
    '256', '--train-iters', '150', '--lr', '3e-3', '--eval-iters', '0', '--sample-tokens', '0', '--save', checkpoint],
    { encoding: 'utf8' });
  check(trained.status === 0, `training the test model failed:\n${trained.stdout}\n${trained.stderr}`);
  return checkpoint;
}

export async function startServer(graphed, args, { readyTimeoutMs = 180000, env = process.env } = {}) {
  const child = spawn(graphed, ['serve', ...args, '--host', '127.0.0.1', '--port', '0', '--json'],
                      { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stderr = '';
  child.stderr.on('data', (data) => { stderr += data; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const lines = readline.createInterface({ input: child.stdout });
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`graphed serve was not ready in ${readyTimeoutMs} ms:\n${stderr}`)),
                             readyTimeoutMs);
    lines.on('line', (line) => {
      let event;
      try { event = JSON.parse(line); } catch { return; }
      if (event.event === 'ready') { clearTimeout(timer); resolve(event); }
    });
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`graphed serve exited (${code}) before it was ready:\n${stderr}`)); });
  });
  return {
    ready,
    pid: child.pid,
    port: ready.port,
    base: `http://127.0.0.1:${ready.port}`,
    stderr: () => stderr,
    /** SIGTERM, then the exit code (throws when it does not exit within timeoutMs). */
    async stop(timeoutMs = 90000) {
      child.kill('SIGTERM');
      let timer;
      const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs); });
      const result = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      if (result === null) {
        child.kill('SIGKILL');
        throw new Error(`graphed serve did not exit within ${timeoutMs} ms of SIGTERM:\n${stderr}`);
      }
      return result.code;
    },
  };
}

/** Reads a server-sent event stream from a fetch Response: the parsed data events, and whether [DONE] came. */
export async function readEvents(response, { abortAfter = -1, controller = null } = {}) {
  const decoder = new TextDecoder();
  let buffer = '';
  const events = [];
  let done = false;
  for await (const piece of response.body) {
    buffer += decoder.decode(piece, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        events.push(JSON.parse(data));
      }
    }
    if (abortAfter >= 0 && events.length > abortAfter && controller) {
      controller.abort();
      return { events, done: false, aborted: true };
    }
  }
  return { events, done, aborted: false };
}

export async function metric(base, name) {
  const page = await (await fetch(`${base}/metrics`)).text();
  const line = page.split('\n').find((text) => text.startsWith(name + ' '));
  check(line !== undefined, `/metrics has no ${name}:\n${page}`);
  return Number(line.split(' ')[1]);
}

/** Waits until the engine holds at least `count` requests, running or queued: a request sent after that queues
 * behind them, whatever order concurrent connections reached the server in. */
export async function waitForRequests(base, count, timeoutMs = 30000) {
  const start = Date.now();
  for (;;) {
    const held = (await metric(base, 'graphed_running_requests')) + (await metric(base, 'graphed_queued_requests'));
    if (held >= count) return;
    if (Date.now() - start > timeoutMs) throw new Error(`the server held ${held} requests, not ${count}, after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits until the engine holds no request and no block (a cancelled one gives its blocks back). */
export async function waitForIdle(base, timeoutMs = 60000) {
  const start = Date.now();
  for (;;) {
    const blocks = await metric(base, 'graphed_kv_blocks_in_use');
    const running = await metric(base, 'graphed_running_requests');
    const queued = await metric(base, 'graphed_queued_requests');
    if (blocks === 0 && running === 0 && queued === 0) return;
    if (Date.now() - start > timeoutMs) {
      throw new Error(`the server did not come back to idle: ${blocks} blocks, ${running} running, ${queued} queued`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
