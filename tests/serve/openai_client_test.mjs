// tests/serve/openai_client_test.mjs — `graphed serve` driven by OpenAI's own client (the `openai` npm
// package): models, completions and chat completions, whole and streamed, seeds, stop strings, usage,
// and the errors the client maps to its exception classes (wrong key, unknown model, too long).
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
