// tests/serve/connection_burst_test.mjs — 1,024 clients connect to `graphed serve` at once, each on its own
// connection with one small completion (3 tokens, half of them streamed), more than the server holds (32 running,
// 480 queued): every client must be answered, 200 with its whole answer or stream, or 429 with Retry-After; none
// reset, refused or left without an answer. The server's counts must match what the clients got, and every KV
// block must come back. No timing is asserted; one overall limit bounds the test.
// Usage: node connection_burst_test.mjs GRAPHED MODEL_DIR
import net from 'node:net';
import { check, metric, startServer, waitForIdle } from './server_process.mjs';

const [graphed, modelDir] = process.argv.slice(2);
const kClients = 1024;
const kLimitMs = 240000;

/** Splits a raw HTTP/1.1 response into its status, headers (lower-case names) and body. */
function parseResponse(raw) {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...headerLines] = raw.slice(0, end).split('\r\n');
  const headers = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4) };
}

/** What one answer was: '200', '429', or a description of what was wrong with it. */
function judge(response, stream) {
  if (response.status === 429) {
    if (response.headers['retry-after'] !== '1') return `429 without Retry-After: 1 (${JSON.stringify(response.headers)})`;
    return /queue is full/.test(JSON.parse(response.body).error?.message ?? '') ? '429' : `429 with ${response.body}`;
  }
  if (response.status !== 200) return `status ${response.status}: ${response.body.slice(0, 300)}`;
  if (stream) {
    const complete = response.body.includes('data: [DONE]') && response.body.includes('"finish_reason":"length"');
    return complete && !response.body.includes('"error"') ? '200' : `an incomplete stream: ${response.body.slice(0, 300)}`;
  }
  const whole = JSON.parse(response.body);
  return whole.usage?.completion_tokens === 3 ? '200' : `a whole answer without 3 tokens: ${response.body.slice(0, 300)}`;
}

/** One client: connects, sends its request with Connection: close and reads until the server closes. */
function client(port, index, sockets) {
  const stream = index % 2 === 1;
  const body = JSON.stringify({ prompt: `Client ${index} says`, max_tokens: 3, temperature: 0, ignore_eos: true, stream });
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    sockets.push(socket);
    let raw = '';
    let settled = false;
    const settle = (outcome) => { if (!settled) { settled = true; resolve(outcome); } };
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(
      `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
    socket.on('data', (piece) => { raw += piece; });
    socket.on('error', (error) => settle(`${error.code ?? error.message} (reset or refused)`));
    socket.on('close', () => {
      const response = parseResponse(raw);
      if (!response) { settle(`closed without an answer (${raw.length} bytes)`); return; }
      try { settle(judge(response, stream)); } catch (error) { settle(`an unreadable answer (${error.message}): ${raw.slice(0, 300)}`); }
    });
  });
}

const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '32',
                                           '--max-queued-requests', '480']);
const sockets = [];
let timer;
try {
  const started = Date.now();
  const limit = new Promise((resolve) => { timer = setTimeout(resolve, kLimitMs, 'limit'); });
  const answers = Promise.all(Array.from({ length: kClients }, (_, index) => client(server.port, index, sockets)));
  const outcomes = await Promise.race([answers, limit]);
  if (outcomes === 'limit') {
    for (const socket of sockets) socket.destroy();
    throw new Error(`the ${kClients} clients were not all answered within ${kLimitMs / 1000} s`);
  }
  clearTimeout(timer);
  const count = (outcome) => outcomes.filter((value) => value === outcome).length;
  const wrong = outcomes.map((outcome, index) => ({ outcome, index })).filter(({ outcome }) => outcome !== '200' && outcome !== '429');
  check(wrong.length === 0, `${wrong.length} of ${kClients} clients were not answered 200 or 429; the first: ` +
                            wrong.slice(0, 5).map(({ outcome, index }) => `client ${index}: ${outcome}`).join('; '));
  console.log(`ok - ${kClients} clients at once in ${((Date.now() - started) / 1000).toFixed(1)} s: ${count('200')} answered 200, ` +
              `${count('429')} 429 with Retry-After; none reset or lost`);
  await waitForIdle(server.base);
  const completed = await metric(server.base, 'graphed_requests_total{outcome="completed"}');
  const refused = await metric(server.base, 'graphed_requests_total{outcome="refused"}');
  check(completed === count('200') && refused === count('429'),
        `the server counted ${completed} completed and ${refused} refused; the clients got ${count('200')} and ${count('429')}`);
  check(await metric(server.base, 'graphed_step_duration_seconds_count') === await metric(server.base, 'graphed_engine_steps_total{mode="graph"}') +
        await metric(server.base, 'graphed_engine_steps_total{mode="eager"}'), 'graphed_step_duration_seconds_count is not the steps the engine ran');
  console.log('ok - the server counted what the clients got, timed every step, and every KV block came back');
  const code = await server.stop();
  check(code === 0, `exit ${code} after SIGTERM`);
  console.log('ok - SIGTERM after the burst: exit 0');
} catch (error) {
  clearTimeout(timer);
  console.error(`FAILED: ${error.stack ?? error}\nserver stderr:\n${server.stderr()}`);
  await server.stop().catch(() => {});
  process.exit(1);
}
