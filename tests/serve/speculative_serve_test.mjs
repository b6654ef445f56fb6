// tests/serve/speculative_serve_test.mjs — `graphed serve --speculative-config` on the CPU, by prompt lookup and with a
// draft model (the served checkpoint as its own draft), serving a small byte-level model trained on one repeated
// sentence (its text repeats, so proposals are kept): greedy completions equal the server's without speculation,
// streamed and not; the stream carries every token (a chunk may hold several kept at once), /metrics counts proposed
// and kept tokens, and a method graphed has not built stops the server before it serves, with the fix.
// Usage: node speculative_serve_test.mjs GRAPHED WORK_DIR
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { check, metric, readEvents, startServer, trainSentenceModel } from './server_process.mjs';

const [graphed, work] = process.argv.slice(2);
const checkpoint = trainSentenceModel(graphed, work);
const model = 'run';
const args = ['--load', checkpoint, '--device', 'cpu', '--inference-max-requests', '4'];
const speculation = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 1}';
// The sentence once, then its start again: lookup proposes what followed (prompt and 16 tokens fit the context of 64).
const prompts = ['The quick brown fox jumps over the lazy dog. T', 'fox jumps over the lazy dog. The quick brown',
                 'over the lazy dog. The quick brown fox jumps'];

async function complete(base, prompt, stream) {
  const response = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: 16, temperature: 0, stream }),
  });
  if (response.status !== 200) throw new Error(`'${prompt}': status ${response.status}: ${await response.text()}`);
  if (!stream) return { text: (await response.json()).choices[0].text, chunks: 1 };
  const { events, done } = await readEvents(response);
  check(done, `'${prompt}': the stream ended without [DONE]`);
  const pieces = events.filter((event) => event.choices?.length > 0).map((event) => event.choices[0].text ?? '');
  return { text: pieces.join(''), chunks: pieces.filter((piece) => piece.length > 0).length };
}

const plain = await startServer(graphed, args);
const expected = [];
for (const prompt of prompts) expected.push((await complete(plain.base, prompt, false)).text);
check((await plain.stop()) === 0, `the server without speculation did not exit 0:\n${plain.stderr()}`);

async function checkSpeculating(config, label) {
  const server = await startServer(graphed, [...args, '--speculative-config', config]);
  try {
    for (let i = 0; i < prompts.length; ++i) {
      const whole = await complete(server.base, prompts[i], false);
      check(whole.text === expected[i], `'${prompts[i]}' with ${label}: ${JSON.stringify(whole.text)}, without ` +
                                        JSON.stringify(expected[i]));
      const streamed = await complete(server.base, prompts[i], true);
      check(streamed.text === expected[i], `'${prompts[i]}' streamed with ${label}: ${JSON.stringify(streamed.text)}`);
    }
    console.log(`ok - ${label}: greedy completions equal those without speculation, streamed and not: ` +
                JSON.stringify(expected));
    const proposed = await metric(server.base, 'graphed_spec_decode_draft_tokens_total');
    const kept = await metric(server.base, 'graphed_spec_decode_accepted_tokens_total');
    const verifications = await metric(server.base, 'graphed_spec_decode_num_drafts_total');
    check(proposed > 0 && kept > 0 && kept <= proposed && verifications > 0,
          `${label} /metrics: ${verifications} verifications, ${kept} of ${proposed} proposed tokens kept`);
    console.log(`ok - ${label} /metrics: ${verifications} verifications, ${kept} of ${proposed} proposed tokens kept`);
  } finally {
    check((await server.stop()) === 0, `the server with ${label} did not exit 0:\n${server.stderr()}`);
  }
}

await checkSpeculating(speculation, 'prompt lookup');
// The served model as its own draft (the same tokenizer): its own engine, cache and steps propose.
await checkSpeculating(JSON.stringify({ method: 'draft_model', model: checkpoint, num_speculative_tokens: 3 }),
                       'a draft model');

const refused = spawnSync(graphed, ['serve', ...args, '--port', '0', '--speculative-config',
                                    '{"method": "eagle3", "num_speculative_tokens": 3}'],
                          { encoding: 'utf8', timeout: 60000 });
check(refused.status === 1 && refused.stderr.includes("--speculative-config: the method 'eagle3' is not built yet") &&
      refused.stderr.includes('fix: give'), `an unbuilt method: status ${refused.status}:\n${refused.stderr}`);
console.log('ok - a method graphed has not built is refused with the fix');
fs.rmSync(work, { recursive: true, force: true });
