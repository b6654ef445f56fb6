// tests/serve/openai_client_test.mjs — `graphed serve` driven by OpenAI's own client (the `openai` npm
// package): models, completions and chat completions, whole and streamed, seeds, stop strings, usage, log
// probabilities, sampling controls, structured output (response_format) and required tool calls, and the errors the
// client maps to its exception classes (wrong key, unknown model, too long, fields out of range).
// Usage: node openai_client_test.mjs GRAPHED MODEL_DIR OPENAI_PACKAGE_DIR
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { check, startServer } from './server_process.mjs';

const [graphed, modelDir, openaiDir] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(path.join(openaiDir, 'index.mjs')).href);

const server = await startServer(graphed, ['--hf', modelDir, '--device', 'cpu', '--inference-max-requests', '8',
                                           '--api-key', 'test-key', '--served-model-name', 'tiny-llama']);
const client = new OpenAI({ apiKey: 'test-key', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 120000 });
const model = 'tiny-llama';
let passed = 0;
async function step(name, body) {
  await body();
  passed += 1;
  console.log(`ok - ${name}`);
}

try {
  await step('models.list names the served model', async () => {
    const models = await client.models.list();
    check(models.data.length === 1 && models.data[0].id === model, `models: ${JSON.stringify(models.data)}`);
  });

  let greedy;
  await step('completions.create: greedy text, usage and a finish reason', async () => {
    const completion = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 });
    greedy = completion.choices[0].text;
    check(completion.object === 'text_completion', `object ${completion.object}`);
    check(typeof greedy === 'string' && greedy.length > 0, `text ${JSON.stringify(greedy)}`);
    check(['length', 'stop'].includes(completion.choices[0].finish_reason), `finish ${completion.choices[0].finish_reason}`);
    check(completion.usage.prompt_tokens === 5, `prompt tokens ${completion.usage.prompt_tokens} (GPT-2 BPE gives 5)`);
    check(completion.usage.completion_tokens >= 1 && completion.usage.completion_tokens <= 8, JSON.stringify(completion.usage));
    const again = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 });
    check(again.choices[0].text === greedy, `greedy differs: ${JSON.stringify(greedy)} then ${JSON.stringify(again.choices[0].text)}`);
  });

  await step('completions.create with stream: the same text in chunks, then the usage', async () => {
    const stream = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0,
                                                     stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.text;
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    check(text === greedy, `streamed ${JSON.stringify(text)}, whole ${JSON.stringify(greedy)}`);
    check(finish !== null, 'no finish reason in the stream');
    check(usage !== null && usage.prompt_tokens === 5, `usage ${JSON.stringify(usage)}`);
  });

  await step('a list of prompts (LangChain\'s OpenAI.generate(["The", "Our"])): one choice each, in order', async () => {
    const ask = (prompt) => client.completions.create({ model, prompt, max_tokens: 6, temperature: 0 });
    const [both, first, second] = await Promise.all([ask(['The', 'Our']), ask('The'), ask('Our')]);
    check(both.choices.length === 2, `${both.choices.length} choices for two prompts`);
    check(both.choices[0].index === 0 && both.choices[1].index === 1, 'choices out of order');
    check(both.choices[0].text === first.choices[0].text && both.choices[1].text === second.choices[0].text,
          `the list's answers ${JSON.stringify(both.choices.map((c) => c.text))} differ from one prompt each`);
    check(both.usage.prompt_tokens === first.usage.prompt_tokens + second.usage.prompt_tokens, 'usage not summed');
    const stream = await client.completions.create({ model, prompt: ['The', 'Our'], max_tokens: 6, temperature: 0,
                                                     stream: true });
    const texts = ['', ''];
    const finished = [false, false];
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        texts[choice.index] += choice.text;
        if (choice.finish_reason) finished[choice.index] = true;
      }
    }
    check(texts[0] === first.choices[0].text && texts[1] === second.choices[0].text && finished.every(Boolean),
          `streamed ${JSON.stringify(texts)}`);
  });

  await step('a seed repeats a sampled completion', async () => {
    const ask = (seed) => client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0.9,
                                                      top_p: 0.95, seed });
    const [first, second] = await Promise.all([ask(11), ask(11)]);
    check(first.choices[0].text === second.choices[0].text, 'the same seed drew different texts');
  });

  await step('a stop string ends the text before it', async () => {
    const long = await client.completions.create({ model, prompt: 'Hello', max_tokens: 16, temperature: 0, stop_token_ids: [] });
    const text = long.choices[0].text;
    check(text.length >= 4, `too short to pick a stop string: ${JSON.stringify(text)}`);
    const stop = text.slice(2, 4);
    const stopped = await client.completions.create({ model, prompt: 'Hello', max_tokens: 16, temperature: 0, stop: [stop] });
    check(stopped.choices[0].text === text.slice(0, text.indexOf(stop)), `stopped at ${JSON.stringify(stop)}: ${JSON.stringify(stopped.choices[0].text)}`);
    check(stopped.choices[0].finish_reason === 'stop', `finish ${stopped.choices[0].finish_reason}`);
  });

  let chatText;
  await step('chat.completions.create renders the chat template and answers as the assistant', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hi.' }];
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0 });
    check(chat.object === 'chat.completion', `object ${chat.object}`);
    check(chat.choices[0].message.role === 'assistant', `role ${chat.choices[0].message.role}`);
    chatText = chat.choices[0].message.content;
    check(typeof chatText === 'string', `content ${JSON.stringify(chatText)}`);
    // Qwen2.5's template around the two messages: GPT-2's BPE makes far more than the words alone.
    check(chat.usage.prompt_tokens > 20, `prompt tokens ${chat.usage.prompt_tokens}`);
  });

  await step('chat.completions.create with stream: the role first, then the same content', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hi.' }];
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0, stream: true });
    let content = '';
    let role = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta ?? {};
      if (delta.role && role === null) role = delta.role;
      content += delta.content ?? '';
    }
    check(role === 'assistant', `role ${role}`);
    check(content === chatText, `streamed ${JSON.stringify(content)}, whole ${JSON.stringify(chatText)}`);
  });

  // The test model's template is Qwen2.5's, which teaches <tool_call> blocks: with tools, a reply is read for calls.
  // The tiny model writes no call, so its text must come back as content, whole and streamed alike (nothing held
  // back and lost), with the same text as the reply without tools would have had under the tools' prompt.
  await step('chat with tools: the reply is content or well-formed tool calls, whole and streamed alike', async () => {
    const messages = [{ role: 'user', content: 'Weather in Paris?' }];
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const whole = await client.chat.completions.create({ model, messages, tools, max_tokens: 12, temperature: 0 });
    const message = whole.choices[0].message;
    const reason = whole.choices[0].finish_reason;
    if (message.tool_calls) {
      check(reason === 'tool_calls', `finish ${reason} with tool calls`);
      for (const call of message.tool_calls) {
        check(call.type === 'function' && call.function.name === 'get_weather' && /^call_/.test(call.id),
          `call ${JSON.stringify(call)}`);
        JSON.parse(call.function.arguments);
      }
    } else {
      check(typeof message.content === 'string' && ['stop', 'length'].includes(reason),
        `content ${JSON.stringify(message.content)}, finish ${reason}`);
    }
    const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', max_tokens: 12,
      temperature: 0 });
    check(none.choices[0].message.tool_calls === undefined, 'tool_choice none gave tool calls');
    if (!message.tool_calls) check(none.choices[0].message.content === message.content, 'tool_choice none changed the text');
    const stream = await client.chat.completions.create({ model, messages, tools, max_tokens: 12, temperature: 0,
      stream: true });
    let content = '';
    let calls = [];
    let finish = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta ?? {};
      content += delta.content ?? '';
      calls = calls.concat(delta.tool_calls ?? []);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    check(finish === reason, `streamed finish ${finish}, whole ${reason}`);
    if (message.tool_calls) {
      check(calls.length === message.tool_calls.length, `streamed ${calls.length} calls, whole ${message.tool_calls.length}`);
    } else {
      check(content === message.content && calls.length === 0, `streamed ${JSON.stringify(content)}, whole ${JSON.stringify(message.content)}`);
    }
  });

  await step('n = 2: two choices in order, whole and streamed alike; a seed gives each its own draw', async () => {
    const greedy = await client.completions.create({ model, prompt: 'The quick', max_tokens: 5, temperature: 0, n: 2 });
    check(greedy.choices.length === 2 && greedy.choices[0].index === 0 && greedy.choices[1].index === 1,
      `choices ${JSON.stringify(greedy.choices)}`);
    check(greedy.choices[0].text === greedy.choices[1].text, 'two greedy choices differ');
    check(greedy.usage.completion_tokens === 10, `usage ${JSON.stringify(greedy.usage)}`);
    const messages = [{ role: 'user', content: 'Say hi.' }];
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 1, seed: 7, n: 2 });
    check(chat.choices.length === 2 && chat.choices[1].index === 1, `chat choices ${JSON.stringify(chat.choices)}`);
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 1, seed: 7, n: 2,
      stream: true });
    const texts = ['', ''];
    const roles = [null, null];
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        texts[choice.index] += choice.delta?.content ?? '';
        if (choice.delta?.role) roles[choice.index] = choice.delta.role;
      }
    }
    check(roles.every((role) => role === 'assistant'), `roles ${JSON.stringify(roles)}`);
    check(texts[0] === chat.choices[0].message.content && texts[1] === chat.choices[1].message.content,
      `streamed ${JSON.stringify(texts)}, whole ${JSON.stringify(chat.choices.map((c) => c.message.content))}`);
  });

  // Issue 45. Log probabilities: the engine's, from the model's logits before penalties, bias and temperature; with
  // temperature 0 the drawn token is the likeliest. ignore_eos keeps the token count fixed.
  await step('completions with logprobs: tokens, token_logprobs, top_logprobs and text_offset, whole and streamed', async () => {
    const ask = { model, prompt: 'The capital of France is', max_tokens: 6, temperature: 0, logprobs: 3, ignore_eos: true };
    const whole = await client.completions.create(ask);
    const { text, logprobs } = whole.choices[0];
    check(logprobs && logprobs.tokens.length === 6 && logprobs.token_logprobs.length === 6 &&
          logprobs.top_logprobs.length === 6 && logprobs.text_offset.length === 6, `logprobs ${JSON.stringify(logprobs)}`);
    // Unless a token is part of a character (U+FFFD alone) or the end token (drawn as any other with ignore_eos, but
    // left out of the text), the tokens make the text.
    if (!logprobs.tokens.some((token) => token.includes('\uFFFD') || token === '<|endoftext|>')) {
      check(logprobs.tokens.join('') === text, `tokens ${JSON.stringify(logprobs.tokens)}, text ${JSON.stringify(text)}`);
    }
    let offset = 0;
    for (let i = 0; i < 6; i += 1) {
      const top = logprobs.top_logprobs[i];
      const alternatives = Object.values(top);
      check(logprobs.token_logprobs[i] <= 1e-6, `token_logprobs ${logprobs.token_logprobs}`);
      check(alternatives.length >= 1 && alternatives.length <= 4 && logprobs.tokens[i] in top, `top ${JSON.stringify(top)}`);
      check(Math.max(...alternatives) <= logprobs.token_logprobs[i] + 1e-4, `greedy drew below its best: ${JSON.stringify(top)}`);
      check(logprobs.text_offset[i] === offset, `text_offset ${logprobs.text_offset}`);
      offset += [...logprobs.tokens[i]].length;
    }
    const stream = await client.completions.create({ ...ask, stream: true });
    const streamed = { tokens: [], text_offset: [] };
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        streamed.tokens.push(...(choice.logprobs?.tokens ?? []));
        streamed.text_offset.push(...(choice.logprobs?.text_offset ?? []));
      }
    }
    check(JSON.stringify(streamed.tokens) === JSON.stringify(logprobs.tokens), `streamed ${JSON.stringify(streamed.tokens)}`);
    check(JSON.stringify(streamed.text_offset) === JSON.stringify(logprobs.text_offset), `streamed offsets ${streamed.text_offset}`);
  });

  await step('chat with logprobs and top_logprobs: content entries with bytes, whole and streamed', async () => {
    const ask = { model, messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 5, temperature: 0, logprobs: true,
                  top_logprobs: 2, ignore_eos: true };
    const whole = await client.chat.completions.create(ask);
    const content = whole.choices[0].logprobs?.content;
    check(Array.isArray(content) && content.length === 5, `logprobs ${JSON.stringify(whole.choices[0].logprobs)}`);
    for (const entry of content) {
      check(typeof entry.token === 'string' && entry.logprob <= 1e-6 && Array.isArray(entry.bytes), `entry ${JSON.stringify(entry)}`);
      check(entry.top_logprobs.length === 2 && entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob &&
            Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-4, `top ${JSON.stringify(entry.top_logprobs)}`);
    }
    const message = whole.choices[0].message.content;
    if (!message.includes('\uFFFD') && !content.some((entry) => entry.token === '<|endoftext|>')) {  // bytes make the reply
      check(Buffer.from(content.flatMap((entry) => entry.bytes)).toString('utf8') === message, `bytes of ${JSON.stringify(message)}`);
    }
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const tokens = [];
    for await (const chunk of stream) tokens.push(...(chunk.choices[0]?.logprobs?.content ?? []).map((entry) => entry.token));
    check(JSON.stringify(tokens) === JSON.stringify(content.map((entry) => entry.token)), `streamed ${JSON.stringify(tokens)}`);
  });

  await step('logit_bias, min_tokens, penalties and min_p are applied', async () => {
    // GPT-2's id 64 is "a": a bias of 100 makes it every greedy draw.
    const biased = await client.completions.create({ model, prompt: 'Hello', max_tokens: 4, temperature: 0,
                                                     logit_bias: { 64: 100 }, ignore_eos: true });
    check(biased.choices[0].text === 'aaaa', `biased ${JSON.stringify(biased.choices[0].text)}`);
    // The end token (50256) favoured, but not before 3 tokens: the fourth ends the request.
    const early = await client.completions.create({ model, prompt: 'Hello', max_tokens: 10, temperature: 0,
                                                    logit_bias: { 50256: 100 }, min_tokens: 3 });
    check(early.usage.completion_tokens === 4 && early.choices[0].finish_reason === 'stop',
          `min_tokens: ${JSON.stringify(early.usage)}, ${early.choices[0].finish_reason}`);
    const ask = { model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0.8, seed: 3, presence_penalty: 1.5,
                  frequency_penalty: 1, repetition_penalty: 1.3, min_p: 0.1 };
    const [first, second] = await Promise.all([client.completions.create(ask), client.completions.create(ask)]);
    check(first.choices[0].text === second.choices[0].text, 'the same seed and controls drew different texts');
  });

  // Structured output: only constrained decoding makes a random model write documents of a schema. The strings are
  // bounded (enums, maxLength), so a document is at most 164 bytes: 200 tokens always finish it.
  const colorSchema = { type: 'object', additionalProperties: false, required: ['color', 'name', 'count', 'ok'],
    properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, name: { type: 'string', maxLength: 8 },
                  count: { type: 'integer' }, ok: { type: 'boolean' } } };
  const fitsColorSchema = (document) => document !== null && typeof document === 'object' && !Array.isArray(document) &&
    Object.keys(document).sort().join() === 'color,count,name,ok' && ['red', 'green', 'blue'].includes(document.color) &&
    typeof document.name === 'string' && [...document.name].length <= 8 && Number.isInteger(document.count) &&
    typeof document.ok === 'boolean';
  const colorFormat = { type: 'json_schema', json_schema: { name: 'color', strict: true, schema: colorSchema } };
  const colorMessages = [{ role: 'user', content: 'Describe a color as JSON.' }];

  await step('response_format json_schema: 50 of 50 seeded tries parse and fit the schema; streamed too', async () => {
    const whole = await client.chat.completions.create({ model, messages: colorMessages, response_format: colorFormat,
                                                         n: 50, seed: 1, temperature: 1, max_tokens: 200 });
    check(whole.choices.length === 50, `${whole.choices.length} choices`);
    for (const choice of whole.choices) {
      const text = choice.message.content;
      check(choice.finish_reason === 'stop', `finish ${choice.finish_reason}: ${JSON.stringify(text)}`);
      let document = null;
      try { document = JSON.parse(text); } catch { check(false, `not JSON: ${JSON.stringify(text)}`); }
      check(fitsColorSchema(document), `does not fit the schema: ${text}`);
    }
    const stream = await client.chat.completions.create({ model, messages: colorMessages, response_format: colorFormat,
                                                          seed: 77, temperature: 1, max_tokens: 200, stream: true });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
    check(fitsColorSchema(JSON.parse(content)), `streamed ${content}`);
  });

  await step('a structured answer cut at max_tokens is a valid prefix with finish_reason length; json_object', async () => {
    // A free string: a random model rarely closes it, so 6 tokens cut most answers.
    const noteFormat = { type: 'json_schema', json_schema: { name: 'note', schema: { type: 'object',
      properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false } } };
    const cut = await client.chat.completions.create({ model, messages: colorMessages, response_format: noteFormat,
                                                       n: 3, seed: 5, temperature: 1, max_tokens: 6 });
    const head = '{"note":"';
    for (const choice of cut.choices) {
      const text = choice.message.content;
      if (choice.finish_reason === 'stop') {
        check(typeof JSON.parse(text).note === 'string', `stopped at ${JSON.stringify(text)}`);
        continue;
      }
      check(choice.finish_reason === 'length', `finish ${choice.finish_reason}`);
      const rest = text.slice(head.length);
      const prefix = text.length <= head.length ? head.startsWith(text)
        : text.startsWith(head) && /^(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\(?:u[0-9a-fA-F]{0,3})?|"}?)?$/.test(rest);
      check(prefix, `not a prefix of a conforming document: ${JSON.stringify(text)}`);
    }
    const object = await client.completions.create({ model, prompt: 'JSON:', response_format: { type: 'json_object' },
                                                     n: 2, seed: 9, temperature: 1, max_tokens: 12 });
    for (const choice of object.choices) {
      if (choice.finish_reason === 'stop') {
        const document = JSON.parse(choice.text);
        check(document !== null && typeof document === 'object' && !Array.isArray(document), `json_object gave ${choice.text}`);
      } else {
        check(choice.text.startsWith('{'), `json_object began ${JSON.stringify(choice.text)}`);
      }
    }
  });

  await step('vLLM\'s structured_outputs: regex and choice answers match in 50 of 50 seeded tries; a schema\'s pattern and format', async () => {
    const code = /^[A-Z]{2}-\d{3}( [a-z]{1,5})?$/;
    const regex = await client.completions.create({ model, prompt: 'Code:', n: 50, seed: 2, temperature: 1, max_tokens: 40,
                                                    structured_outputs: { regex: '[A-Z]{2}-\\d{3}( [a-z]{1,5})?' } });
    for (const choice of regex.choices) {
      check(choice.finish_reason === 'stop' && code.test(choice.text), `regex gave ${JSON.stringify(choice.text)} (${choice.finish_reason})`);
    }
    const labels = ['positive', 'negative', 'neutral'];
    const chosen = await client.chat.completions.create({ model, messages: colorMessages, n: 50, seed: 4, temperature: 1,
                                                          max_tokens: 20, guided_choice: labels });
    for (const choice of chosen.choices) check(labels.includes(choice.message.content), `choice gave ${choice.message.content}`);
    const stream = await client.completions.create({ model, prompt: 'Code:', seed: 6, temperature: 1, max_tokens: 40,
                                                     stream: true, structured_outputs: { choice: labels } });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? '';
    check(labels.includes(streamed), `streamed choice ${streamed}`);
    const ticket = { type: 'object', additionalProperties: false, required: ['id', 'day'],
      properties: { id: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' }, day: { type: 'string', format: 'date' } } };
    const tickets = await client.chat.completions.create({ model, messages: colorMessages, n: 50, seed: 8, temperature: 1,
      max_tokens: 60, response_format: { type: 'json_schema', json_schema: { name: 'ticket', schema: ticket } } });
    for (const choice of tickets.choices) {
      const document = JSON.parse(choice.message.content);
      const day = new Date(`${document.day}T00:00:00Z`);
      check(/^[A-Z]{3}-[0-9]{2}$/.test(document.id) && /^\d{4}-\d{2}-\d{2}$/.test(document.day) &&
            day.toISOString().slice(0, 10) === document.day, `ticket ${choice.message.content}`);
    }
  });

  // tool_choice "required" or a named function: the reply is drawn under the calls' grammar (Qwen2.5's <tool_call>
  // blocks). A call is at most 140 bytes, and the tools' prompt 345 tokens, so 150 tokens finish it in the context.
  const callTools = [
    { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Rome', 'Tokyo'] }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'], additionalProperties: false } } },
    { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: { type: 'object',
      properties: { zone: { type: 'string', maxLength: 6 } }, required: ['zone'], additionalProperties: false } } }];
  const fitsCall = (call) => {
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') {
      return Object.keys(args).sort().join() === 'city,unit' && ['Paris', 'Rome', 'Tokyo'].includes(args.city) &&
             ['celsius', 'fahrenheit'].includes(args.unit);
    }
    return call.function.name === 'get_time' && Object.keys(args).join() === 'zone' && typeof args.zone === 'string' &&
           [...args.zone].length <= 6;
  };
  const callMessages = [{ role: 'user', content: 'Weather in Paris?' }];

  await step('tool_choice required: every reply is one call that fits its tool\'s schema, whole and streamed', async () => {
    const whole = await client.chat.completions.create({ model, messages: callMessages, tools: callTools,
      tool_choice: 'required', parallel_tool_calls: false, n: 10, seed: 21, temperature: 1, max_tokens: 150 });
    for (const choice of whole.choices) {
      const calls = choice.message.tool_calls ?? [];
      check(choice.finish_reason === 'tool_calls' && calls.length === 1 && choice.message.content === null,
            `reply ${JSON.stringify(choice.message)}, finish ${choice.finish_reason}`);
      check(/^call_/.test(calls[0].id) && fitsCall(calls[0]), `call ${JSON.stringify(calls[0])}`);
    }
    const stream = await client.chat.completions.create({ model, messages: callMessages, tools: callTools,
      tool_choice: 'required', parallel_tool_calls: false, seed: 22, temperature: 1, max_tokens: 150, stream: true });
    let calls = [];
    let finish = null;
    for await (const chunk of stream) {
      calls = calls.concat(chunk.choices[0]?.delta?.tool_calls ?? []);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    check(finish === 'tool_calls' && calls.length === 1 && fitsCall(calls[0]), `streamed ${JSON.stringify(calls)}, ${finish}`);
  });

  await step('tool_choice naming a function: every reply calls that one', async () => {
    const named = await client.chat.completions.create({ model, messages: callMessages, tools: callTools,
      tool_choice: { type: 'function', function: { name: 'get_time' } }, n: 3, seed: 31, temperature: 1, max_tokens: 150 });
    for (const choice of named.choices) {
      const calls = choice.message.tool_calls ?? [];
      check(calls.length === 1 && calls[0].function.name === 'get_time' && fitsCall(calls[0]),
            `reply ${JSON.stringify(choice.message)}`);
    }
  });

  await step('errors come back as the client\'s exception classes with a message', async () => {
    const wrongKey = new OpenAI({ apiKey: 'wrong', baseURL: `${server.base}/v1`, maxRetries: 0 });
    try { await wrongKey.models.list(); check(false, 'a wrong key was accepted'); } catch (error) {
      check(error instanceof OpenAI.AuthenticationError, `wrong key gave ${error}`);
    }
    try { await client.completions.create({ model: 'gpt-4', prompt: 'x', max_tokens: 2 }); check(false, 'unknown model accepted'); } catch (error) {
      check(error instanceof OpenAI.NotFoundError && /not served here/.test(error.message), `unknown model gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', max_tokens: 5000 }); check(false, 'too long accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /context/.test(error.message), `too long gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', n: 2, best_of: 3 }); check(false, 'best_of accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /best_of/.test(error.message), `best_of gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', logprobs: 21 }); check(false, 'logprobs 21 accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /'logprobs' is 21/.test(error.message), `logprobs 21 gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', presence_penalty: 3 }); check(false, 'penalty 3 accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /presence_penalty/.test(error.message), `presence_penalty 3 gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', logit_bias: { 60000: 1 } }); check(false, 'id 60000 accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /outside the vocabulary/.test(error.message), `logit_bias 60000 gave ${error}`);
    }
    try {
      await client.chat.completions.create({ model, messages: colorMessages, response_format: { type: 'json_schema',
        json_schema: { name: 'x', schema: { type: 'string', pattern: '^(?=a)a+$' } } } });
      check(false, 'a lookahead accepted');
    } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /'pattern' at \/: the regular expression/.test(error.message),
            `a lookahead gave ${error}`);
    }
    try { await client.completions.create({ model, prompt: 'x', structured_outputs: { grammar: 'root ::= "a"' } }); check(false, 'a grammar accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /structured_outputs.grammar/.test(error.message), `a grammar gave ${error}`);
    }
    // 9 prompts x n = 128: more choices than the server holds at once (8 running and 1,024 queued).
    try { await client.completions.create({ model, prompt: Array(9).fill('x'), n: 128 }); check(false, '1,152 choices accepted'); } catch (error) {
      check(error instanceof OpenAI.BadRequestError && /asks for 1152 choices/.test(error.message), `1,152 choices gave ${error}`);
    }
  });
} catch (error) {
  console.error(`FAILED after ${passed} checks: ${error.stack ?? error}\nserver stderr:\n${server.stderr()}`);
  await server.stop().catch(() => {});
  process.exit(1);
}
const code = await server.stop();
check(code === 0, `graphed serve exited ${code} after SIGTERM:\n${server.stderr()}`);
console.log(`ok - SIGTERM: exit 0\n${passed + 1} checks passed`);
