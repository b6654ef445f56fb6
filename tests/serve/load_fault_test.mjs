// tests/serve/load_fault_test.mjs — `graphed serve` on loopback under load and abuse, a bounded number
// of requests under a time limit: 40 concurrent clients (streamed and whole completions and chats, a
// seeded third of the streams hung up mid-way), with malformed, oversized and mistyped bodies, unknown
// paths, wrong methods and raw garbage at the same time. The server must stay up, answer every valid
// request, answer every bad one with an OpenAI-style error, and give every KV block back. Then a full
// queue answers 429 with Retry-After, and SIGTERM cancels a running stream (no grace), which its client is
// told of, and exits 0.
// Usage: node load_fault_test.mjs GRAPHED MODEL_DIR
import net from 'node:net';
import { check, metric, readEvents, startServer, waitForIdle, waitForRequests } from './server_process.mjs';

const [graphed, modelDir] = process.argv.slice(2);
let seed = 12345;
const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const post = (base, route, body, init = {}) => fetch(`${base}${route}`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), ...init });

async function expectError(response, status, pattern, what, param = undefined) {
  const text = await response.text();
  check(response.status === status, `${what}: status ${response.status}, wanted ${status}: ${text}`);
  const body = JSON.parse(text);
  check(typeof body.error?.message === 'string' && pattern.test(body.error.message), `${what}: message ${text}`);
  if (param !== undefined) check(body.error.param === param, `${what}: param ${body.error.param}, wanted ${param}`);
}

/** One client: a valid request of a seeded kind; returns what happened. */
async function client(base, index) {
  const chat = random() < 0.4;
  const stream = random() < 0.6;
  const hangUp = stream && random() < 0.35;
  const maxTokens = 4 + Math.floor(random() * 12);
  const route = chat ? '/v1/chat/completions' : '/v1/completions';
  const body = chat ? { messages: [{ role: 'user', content: `Question ${index}?` }], max_tokens: maxTokens, temperature: 0.7, seed: index, stream }
                    : { prompt: `Client ${index} says`, max_tokens: maxTokens, temperature: 0, stream };
  const controller = new AbortController();
  const response = await post(base, route, body, { signal: controller.signal });
  if (response.status !== 200) throw new Error(`client ${index}: status ${response.status}: ${await response.text()}`);
  if (!stream) {
    const whole = await response.json();
    check(whole.choices[0].finish_reason !== null && whole.usage.completion_tokens >= 1, `client ${index}: ${JSON.stringify(whole)}`);
    return 'whole';
  }
  try {
    const { events, done, aborted } = await readEvents(response, { abortAfter: hangUp ? 1 : -1, controller });
    if (aborted) return 'hung up';
    check(done, `client ${index}: the stream ended without [DONE]`);
    check(events.some((event) => event.choices?.[0]?.finish_reason), `client ${index}: no finish reason in the stream`);
    return 'streamed';
  } catch (error) {
    if (hangUp && error.name === 'AbortError') return 'hung up';
    throw error;
  }
}

/** Raw bytes that are not HTTP, and a connection that sends half a body and leaves. */
function rawSocket(port, payload) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(payload));
    socket.on('data', () => {});
    socket.on('close', resolve);
    socket.on('error', resolve);
    setTimeout(() => { socket.destroy(); resolve(); }, 5000);
  });
}

async function faults(base, port) {
  await expectError(await post(base, '/v1/completions', '{"prompt": "x", '), 400, /not valid JSON/, 'malformed JSON');
  await expectError(await post(base, '/v1/completions', '[1, 2]'), 400, /send a JSON object/, 'an array body');
  await expectError(await post(base, '/v1/completions', { prompt: 'x', max_tokens: 'ten' }), 400, /'max_tokens' is a string/, 'wrong type');
  await expectError(await post(base, '/v1/completions', { prompt: 'x', temperature: -1 }), 400, /'temperature' is -1/, 'out of range');
  await expectError(await post(base, '/v1/chat/completions', { messages: 'hi' }), 400, /'messages' is a string/, 'messages not an array');
  await expectError(await post(base, '/v1/completions', { prompt: [999999] }), 400, /outside the model's vocabulary/,
                    'unknown token id', 'prompt');
  await expectError(await post(base, '/v1/completions', { prompt: 'x', max_tokens: 100000 }), 400,
                    /past the context of 512; ask for at most 511 new tokens$/, 'cannot fit', 'max_tokens');
  await expectError(await post(base, '/v1/completions', { prompt: 'x '.repeat(600), max_tokens: 4 }), 400,
                    /the context holds 512 positions, the prompt's and the new tokens'; shorten the prompt to at most 511 tokens/,
                    'a prompt that fills the context', 'prompt');
  await expectError(await post(base, '/v1/completions', 'x'.repeat(17 * 1024 * 1024)), 413, /larger than the server's limit/, 'oversized body');
  await expectError(await fetch(`${base}/v1/nothing`), 404, /there is no GET \/v1\/nothing here/, 'unknown path');
  await expectError(await fetch(`${base}/v1/completions`), 405, /GET is not allowed/, 'wrong method');
  await rawSocket(port, 'GARBAGE\r\n\r\n');
  await rawSocket(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"prompt": "half');
  return 'faults';
}

async function loadAndFaults() {
  const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '8',
                                             '--http-threads', '128']);
  try {
    const started = Date.now();
    const results = await Promise.all([...Array.from({ length: 40 }, (_, i) => client(server.base, i)), faults(server.base, server.port)]);
    const count = (kind) => results.filter((result) => result === kind).length;
    console.log(`ok - 40 clients in ${((Date.now() - started) / 1000).toFixed(1)} s: ${count('whole')} whole, ${count('streamed')} streamed, ` +
                `${count('hung up')} hung up; faults answered`);
    check(count('hung up') >= 3, `only ${count('hung up')} clients hung up: the seeded mix should hang up several`);
    const health = await fetch(`${server.base}/health`);
    check(health.status === 200, `health ${health.status} after the load`);
    await waitForIdle(server.base);
    console.log('ok - every KV block came back, no request left running or queued');
    const code = await server.stop();
    check(code === 0, `exit ${code} after SIGTERM`);
    console.log('ok - SIGTERM after the load: exit 0');
  } catch (error) {
    console.error(`server stderr:\n${server.stderr()}`);
    await server.stop().catch(() => {});
    throw error;
  }
}

async function fullQueue() {
  const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '1',
                                             '--max-queued-requests', '1']);
  try {
    const responses = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      post(server.base, '/v1/completions', { prompt: `Queue ${i}`, max_tokens: 24, temperature: 0 })));
    const refused = responses.filter((response) => response.status === 429);
    check(refused.length >= 1, `no 429 among 12 requests on a queue of 1: ${responses.map((response) => response.status)}`);
    check(refused.every((response) => response.headers.get('retry-after') === '1'), 'a 429 without Retry-After: 1');
    await expectError(refused[0], 429, /queue is full/, 'a full queue');
    for (const response of responses.filter((response) => response.status !== 429)) {
      check(response.status === 200, `status ${response.status}`);
      await response.json();
    }
    console.log(`ok - a full queue: ${refused.length} of 12 answered 429 with Retry-After, the rest 200`);
    await expectError(await post(server.base, '/v1/completions', { prompt: ['a', 'b', 'c'], max_tokens: 2 }), 400,
                      /'prompt' holds 3 prompts, more than this server holds at once \(2, running and queued\)/,
                      'more prompts than the server holds');
    console.log('ok - more prompts in one request than the server holds: 400, not a 429 that no retry could pass');
    await waitForIdle(server.base);
    check(await server.stop() === 0, 'exit after the queue test');
  } catch (error) {
    console.error(`server stderr:\n${server.stderr()}`);
    await server.stop().catch(() => {});
    throw error;
  }
}

/** A whole (not streamed) answer whose client hangs up while it waits: the server notices at its next
 * heartbeat (asking the connection, without writing to it) and cancels it. One request runs at a time, so the hung-up one
 * waits behind long ones (sent before it and held by the engine when it goes out). */
async function wholeAnswerHangUp() {
  // More HTTP threads than connections: each open one holds a thread, and /metrics must answer meanwhile.
  const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '1',
                                             '--http-threads', '64']);
  try {
    // Concurrent requests reach the engine in any order: the hung-up one goes out once 30 of the 40 long ones are
    // held, so it waits behind at least 30 x 480 tokens (seconds on any CPU), past the abort and a heartbeat.
    const long = Array.from({ length: 40 }, (_, i) => post(server.base, '/v1/completions',
      { prompt: `Long ${i}`, max_tokens: 480, temperature: 0, ignore_eos: true }).then((response) => response.json()));
    await waitForRequests(server.base, 30);
    const controller = new AbortController();
    const leaving = post(server.base, '/v1/completions', { prompt: 'I will leave', max_tokens: 8 }, { signal: controller.signal })
      .then((response) => response.text()).catch((error) => error.name);
    setTimeout(() => controller.abort(), 2500);
    const outcome = await leaving;
    check(outcome === 'AbortError', `the hung-up client got ${outcome}`);
    for (const body of await Promise.all(long)) check(body.usage?.completion_tokens === 480, JSON.stringify(body).slice(0, 300));
    await waitForIdle(server.base);
    check(await metric(server.base, 'graphed_requests_total{outcome="cancelled"}') === 1, 'the hung-up request was not counted cancelled');
    console.log('ok - a whole answer\'s client hung up while it waited: cancelled at the next heartbeat; the others finished');
    check(await server.stop() === 0, 'exit after the hang-up test');
  } catch (error) {
    console.error(`server stderr:\n${server.stderr()}`);
    await server.stop().catch(() => {});
    throw error;
  }
}

/** Whole answers that fail late keep their status: with one request running at a time, SIGTERM without grace
 * comes after the waiting ones have waited past two heartbeats; each answer is then 200 with its whole text, or
 * 503 with an OpenAI-style error, never 200 with an error in the body. */
async function lateFailuresKeepTheirStatus() {
  const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '1',
                                             '--shutdown-grace-seconds', '0', '--http-threads', '64']);
  const answers = Array.from({ length: 40 }, (_, i) => post(server.base, '/v1/completions',
    { prompt: `Wait ${i}`, max_tokens: 480, temperature: 0, ignore_eos: true })
    .then(async (response) => ({ status: response.status, text: await response.text() })));
  await waitForRequests(server.base, 30);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  const code = await server.stop(60000);
  const results = await Promise.all(answers);
  check(code === 0, `exit ${code} after SIGTERM:\n${server.stderr()}`);
  for (const { status, text } of results) {
    const body = JSON.parse(text);
    if (status === 200) {
      check(body.error === undefined && body.usage?.completion_tokens === 480, `a 200 that is not a whole answer: ${text.slice(0, 300)}`);
    } else {
      check(status === 503 && /shut down before the request finished/.test(body.error?.message ?? ''), `status ${status}: ${text}`);
    }
  }
  const refused = results.filter(({ status }) => status === 503).length;
  check(refused >= 1, 'no answer was still waiting at SIGTERM');
  console.log(`ok - SIGTERM after the whole answers waited 2.5 s: ${results.length - refused} answered 200, ${refused} ` +
              '503 with an error body, none 200 with an error inside');
}

/** SIGTERM with a stream running: with a grace of 0 the stream is cancelled at once, its client told so
 * with an error event and [DONE], and the server exits 0. */
async function shutdownCancelsARunningStream() {
  const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--shutdown-grace-seconds', '0']);
  const response = await post(server.base, '/v1/completions', { prompt: 'A long story:', max_tokens: 500, temperature: 0,
                                                                  stream: true, ignore_eos: true });
  check(response.status === 200, `status ${response.status}`);
  const reading = readEvents(response);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = Date.now();
  const code = await server.stop(60000);
  const { events, done } = await reading;
  check(code === 0, `exit ${code} after SIGTERM with a stream running:\n${server.stderr()}`);
  check(done, 'the running stream did not end with [DONE]');
  const last = events[events.length - 1];
  check(/shut down before the request finished/.test(last.error?.message ?? ''), `the stream's last event: ${JSON.stringify(last)}`);
  console.log(`ok - SIGTERM with a stream running and no grace: the stream ended with an error event and [DONE] after ` +
              `${events.length - 1} chunks, exit 0 after ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

try {
  await loadAndFaults();
  await fullQueue();
  await wholeAnswerHangUp();
  await lateFailuresKeepTheirStatus();
  await shutdownCancelsARunningStream();
} catch (error) {
  console.error(`FAILED: ${error.stack ?? error}`);
  process.exit(1);
}
