// The official TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.x, its experimental
// tasks client: client.experimental.tasks, the 2025-11-25 era) against OUR server:
// `mcp-tasks serve` with its demo tools, and the task gateway (`serve --upstream`) in
// front of the same demo server and in front of server-everything, over stdio and over
// Streamable HTTP.
//
// Usage: node check.mjs TARGET MCP_TASKS_BIN
//   TARGET  demo-stdio | demo-http | gateway-stdio | gateway-http | everything-stdio | everything-http
// Prints "PASS name" / "FAIL name: why" per check and exits 1 if any check failed,
// 64 on bad usage. Needs interop/node_modules (npm ci in interop/).
//
// What is checked (names end in /TARGET):
//   capabilities   initialize declares tasks {list, cancel, requests.tools.call}; every tool
//                  carries execution.taskSupport
//   task           callToolStream makes a task (taskCreated, taskStatus, the result through
//                  tasks/result) and notifications/tasks/status arrive on the session
//   input          a task that asks for input: the elicitation reaches the client while
//                  tasks/result blocks, tagged with its task, and its answer finishes the task
//   failed         a task whose tool fails ends failed (the stream's error, tasks/get)
//   required       a task-required tool called without a task is -32601 (that era's error)
//   list           tasks/list pages through the caller's tasks with nextCursor; a bad cursor
//                  is -32602
//   cancel         tasks/cancel returns the task cancelled; a second cancel is -32602
//   unknown        an unknown task id is -32602 for tasks/get, tasks/result and tasks/cancel
//   foreign        (HTTP) another caller's task is unknown to tasks/get and absent from its list
//   legacy-task    (everything-*) server-everything's simulate-research-query, a tool that
//                  the upstream itself runs only as a 2025-11-25 task, through the gateway

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { start, stopAll, withTimeout } from './serving.mjs';

const [target, bin] = process.argv.slice(2);
const TARGETS = ['demo-stdio', 'demo-http', 'gateway-stdio', 'gateway-http', 'everything-stdio', 'everything-http'];
if (!TARGETS.includes(target) || !bin) {
  console.error(`usage: node check.mjs ${TARGETS.join('|')} MCP_TASKS_BIN`);
  process.exit(64);
}
const here = new URL('.', import.meta.url).pathname;
const everything = `${here}../node_modules/@modelcontextprotocol/server-everything/dist/index.js`;
const [profile, transport] = target.split('-');

let failures = 0;
const pass = (name) => console.log(`PASS ${name}/${target}`);
const fail = (name, why) => {
  failures += 1;
  console.log(`FAIL ${name}/${target}: ${why}`);
};
async function check(name, body) {
  try {
    await body();
    pass(name);
  } catch (error) {
    fail(name, error?.stack ?? String(error));
  }
}
function assert(condition, why) {
  if (!condition) throw new Error(why);
}

// The server's command line: our demo server, or the gateway in front of one.
const demo = `${bin} serve --store memory --poll-interval 100`;
function serveArgs() {
  const common = ['--store', 'memory', '--poll-interval', '100'];
  switch (profile) {
    case 'demo':
      return common;
    case 'gateway':
      // The upstream (our demo server, 2026-07-28) marks no tool; the gateway is told
      // which tools are task-only, as the demo server says itself.
      return [...common, '--upstream', `${demo} --stdio`, '--tasks', 'confirm_action=required', '--tasks', 'failing_tool=required'];
    default:
      return [...common, '--upstream', `node ${everything} stdio`];
  }
}

const startHttp = () => start('the server', bin, ['serve', '--http', '127.0.0.1:0', ...serveArgs()]);

let url;
// A connected client; over HTTP `token` goes in Authorization (a caller of its own).
async function connect({ token, elicit } = {}) {
  const client = new Client({ name: 'ts-sdk-v1-check', version: '1' }, { capabilities: { elicitation: { form: {} }, tasks: { list: {}, cancel: {} } } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return elicit ? elicit(request.params) : { action: 'decline' };
  });
  const statuses = [];
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === 'notifications/tasks/status') statuses.push(notification.params);
  };
  let clientTransport;
  if (transport === 'stdio') {
    clientTransport = new StdioClientTransport({ command: bin, args: ['serve', '--stdio', ...serveArgs()], stderr: 'inherit' });
  } else {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    clientTransport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  }
  await withTimeout(client.connect(clientTransport), 30000, 'connect');
  await client.listTools();
  return { client, asked, statuses, transport: clientTransport };
}

async function streamed(client, name, args, task = { ttl: 60000 }) {
  const messages = [];
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task, timeout: 60000 });
  for await (const message of stream) messages.push(message);
  return messages;
}
const text = (result) => result?.content?.find((block) => block.type === 'text')?.text;
const codeOf = async (promise) => {
  try {
    await promise;
    return 'no error';
  } catch (error) {
    return error.code;
  }
};

async function demoChecks() {
  const { client, asked, statuses } = await connect({ elicit: () => ({ action: 'accept', content: { confirm: true } }) });
  await check('capabilities', async () => {
    const tasks = client.getServerCapabilities()?.tasks;
    assert(tasks?.list && tasks?.cancel && tasks?.requests?.tools?.call, `capabilities.tasks: ${JSON.stringify(tasks)}`);
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.map((tool) => [tool.name, tool.execution?.taskSupport]));
    assert(support.confirm_action === 'required' && support.failing_tool === 'required', JSON.stringify(support));
    assert(support.long_job === 'optional' && support.sleep === 'optional', JSON.stringify(support));
  });
  await check('task', async () => {
    const messages = await streamed(client, 'long_job', { steps: 3, step_ms: 150 });
    const kinds = messages.map((message) => message.type);
    assert(kinds[0] === 'taskCreated' && kinds.includes('taskStatus') && kinds.at(-1) === 'result', kinds.join(','));
    const created = messages[0].task;
    assert(created.ttl === 60000 && created.pollInterval === 100, JSON.stringify(created));
    assert(text(messages.at(-1).result) === 'done: 3 steps', JSON.stringify(messages.at(-1)));
    const related = messages.at(-1).result._meta?.['io.modelcontextprotocol/related-task']?.taskId;
    assert(related === created.taskId, `related-task ${related}`);
    const mine = statuses.filter((status) => status.taskId === created.taskId);
    assert(mine.length > 0, 'no notifications/tasks/status');
    assert(mine.at(-1).status === 'completed' || mine.some((status) => status.statusMessage?.startsWith('step')), JSON.stringify(mine));
  });
  await check('input', async () => {
    const messages = await streamed(client, 'confirm_action', { action: 'ship it' });
    const last = messages.at(-1);
    assert(last.type === 'result' && text(last.result) === 'confirmed: ship it', JSON.stringify(last));
    const question = asked.at(-1);
    assert(question?.mode === 'form' || question?.requestedSchema, JSON.stringify(question));
    assert(question._meta?.['io.modelcontextprotocol/related-task']?.taskId === messages[0].task.taskId, JSON.stringify(question._meta));
  });
  await check('failed', async () => {
    const messages = await streamed(client, 'failing_tool', {});
    assert(messages.at(-1).type === 'error', JSON.stringify(messages.at(-1)));
    const task = await client.experimental.tasks.getTask(messages[0].task.taskId);
    assert(task.status === 'failed' && task.statusMessage, JSON.stringify(task));
  });
  await check('required', async () => {
    const code = await codeOf(client.request({ method: 'tools/call', params: { name: 'confirm_action', arguments: {} } }, CallToolResultSchema));
    assert(code === -32601, `code ${code}`);
  });
  await check('list', async () => {
    const made = new Set();
    for (let i = 0; i < 53; i += 1) {
      const messages = await streamed(client, 'sleep', { ms: 0 });
      made.add(messages[0].task.taskId);
    }
    const seen = [];
    let cursor;
    let pages = 0;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      seen.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor && pages < 20);
    assert(pages >= 2, `${pages} page(s) for ${seen.length} tasks`);
    assert(new Set(seen).size === seen.length, 'a task listed twice');
    for (const id of made) assert(seen.includes(id), `task ${id.slice(0, 6)}… not listed`);
    const bad = await codeOf(client.experimental.tasks.listTasks('not-a-cursor'));
    assert(bad === -32602, `bad cursor: ${bad}`);
  });
  await check('cancel', async () => {
    const stream = client.experimental.tasks.callToolStream({ name: 'sleep', arguments: { ms: 60000 } }, CallToolResultSchema, { task: {} });
    const first = await stream.next();
    const id = first.value.task.taskId;
    const cancelled = await client.experimental.tasks.cancelTask(id);
    assert(cancelled.status === 'cancelled', JSON.stringify(cancelled));
    const task = await client.experimental.tasks.getTask(id);
    assert(task.status === 'cancelled', JSON.stringify(task));
    const again = await codeOf(client.experimental.tasks.cancelTask(id));
    assert(again === -32602, `second cancel: ${again}`);
    await stream.return();
  });
  await check('unknown', async () => {
    const id = '0000000000000000000000000000000000000000beef';
    for (const call of [
      () => client.experimental.tasks.getTask(id),
      () => client.experimental.tasks.getTaskResult(id, CallToolResultSchema),
      () => client.experimental.tasks.cancelTask(id),
    ]) {
      const code = await codeOf(call());
      assert(code === -32602, `code ${code}`);
    }
  });
  if (transport === 'http') {
    await check('foreign', async () => {
      const alice = await connect({ token: 'alice' });
      const bob = await connect({ token: 'bob' });
      const messages = await streamed(alice.client, 'sleep', { ms: 0 });
      const id = messages[0].task.taskId;
      const code = await codeOf(bob.client.experimental.tasks.getTask(id));
      assert(code === -32602, `bob reads alice's task: ${code}`);
      const list = await bob.client.experimental.tasks.listTasks();
      assert(!list.tasks.some((task) => task.taskId === id), "alice's task in bob's list");
      await alice.client.close();
      await bob.client.close();
    });
  }
  await client.close();
}

async function everythingChecks() {
  const { client, asked } = await connect({ elicit: () => ({ action: 'accept', content: { interpretation: 'technical' } }) });
  await check('capabilities', async () => {
    const tasks = client.getServerCapabilities()?.tasks;
    assert(tasks?.requests?.tools?.call, JSON.stringify(tasks));
    const { tools } = await client.listTools();
    const research = tools.find((tool) => tool.name === 'simulate-research-query');
    assert(research?.execution?.taskSupport === 'required', JSON.stringify(research?.execution));
  });
  await check('legacy-task', async () => {
    const messages = await streamed(client, 'simulate-research-query', { topic: 'rust', ambiguous: true });
    const last = messages.at(-1);
    assert(messages[0].type === 'taskCreated', JSON.stringify(messages[0]));
    assert(last.type === 'result' && /rust/i.test(text(last.result) ?? ''), JSON.stringify(last));
    assert(asked.length > 0, 'the upstream elicitation was not relayed');
  });
  await client.close();
}

try {
  if (transport === 'http') url = await startHttp();
  if (profile === 'everything') await everythingChecks();
  else await demoChecks();
} catch (error) {
  fail('run', error?.stack ?? String(error));
} finally {
  stopAll();
}
process.exit(failures ? 1 : 0);
