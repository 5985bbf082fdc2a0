// The official TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.x) as a host that
// declares NO tasks (`new Client(info, {capabilities: {}})`, plain `callTool` with the SDK's
// default 60 s request timeout) against `mcp-tasks serve --task-tools`: the task tools
// (tasks_wait, tasks_status, tasks_cancel, tasks_answer, tasks_list) that give such a host
// a handle for a call still running after the window (--task-tools-wait), over stdio and
// over Streamable HTTP, with the demo tools and through the task gateway.
//
// Usage: node notasks.mjs TARGET MCP_TASKS_BIN [PYTHON]
//   TARGET  demo-stdio | demo-http | everything-stdio | everything-http | plain-stdio | plain-http
//   PYTHON  (plain-*) a python with fastmcp (interop/.venv/bin/python, as interop/run makes)
// Prints "PASS name/TARGET" / "FAIL name/TARGET: why" per check, "# ..." notes (timings),
// and exits 1 if any check failed, 64 on bad usage. Needs interop/node_modules.
//
// What is checked (every server with --task-tools-wait 2, --store memory):
//   tools          (demo) tools/list shows the five task tools, lists the tools with task tools
//                  on without outputSchema and never taskSupport "required"; a `serve` without
//                  --task-tools lists none of the five. (gateway) the five are listed
//   window         sleep {ms: 10000} returns after the window (well under 6 s) a handle
//                  (structuredContent {taskId, status: working, tool, next: tasks_wait,
//                  suggestedWaitSeconds}, _meta io.github.mcp-tasks/handle, a text naming the
//                  id and tasks_wait; not isError); tasks_wait gives the tool's own result,
//                  shaped as a plain short sleep's, and the same again when called again
//   fast           sleep {ms: 50} answers the same JSON as a `serve` without --task-tools
//   cancel         sleep {ms: 60000}: handle, tasks_cancel, tasks_status says cancelled;
//                  tasks_wait then answers isError with status cancelled
//   sdk-timeout    (the one call with a request timeout: 1000 ms, inside the window) sleep
//                  {ms: 60000}: tasks_list shows its task working while the call waits; the SDK
//                  gives up (-32001) and sends notifications/cancelled; that task is cancelled
//   input-tool     confirm_action (its elicitation, to a client that cannot be asked): the
//                  handle says input_required with inputRequests, next: tasks_answer and a
//                  text naming tasks_answer; tasks_list and tasks_status show it, tasks_answer
//                  (accept + content fitting the requested schema) answers it, tasks_wait
//                  gives "confirmed: ACTION"
//   input-session  a second client declaring elicitation (form) with an ElicitRequestSchema
//                  handler that accepts: confirm_action (then tasks_wait if a handle came)
//                  completes, and the handler was asked
//   foreign        (HTTP, --auth-tokens with two callers) bob's tasks_status / tasks_cancel of
//                  alice's running task answer exactly as for a made-up id (isError), and
//                  alice's task is still working
//   long-op        (everything-*) server-everything's trigger-long-running-operation {duration:
//                  10, steps: 5} through the gateway: handle, tasks_wait, its own result
//   nap            (plain-*) the plain fastmcp server (on its Streamable HTTP, the gateway
//                  on stdio or HTTP in front of it)'s nap {seconds: 10}: handle, tasks_wait,
//                  "slept 10 s"
//   nap-cancel     (plain-*) nap {seconds: 60}: handle, tasks_cancel; the cancel reaches the
//                  tool (naps_cancelled counts it)
//   timeout        (default request options) no callTool came near the SDK's own 60 s request timeout (all under 30 s)
//                  and none failed with -32001

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { start, stopAll, withTimeout } from './serving.mjs';

const [target, bin, python] = process.argv.slice(2);
const TARGETS = ['demo-stdio', 'demo-http', 'everything-stdio', 'everything-http', 'plain-stdio', 'plain-http'];
const [profile, transport] = (target ?? '').split('-');
if (!TARGETS.includes(target) || !bin || (profile === 'plain' && !python)) {
  console.error(`usage: node notasks.mjs ${TARGETS.join('|')} MCP_TASKS_BIN [PYTHON (plain-*)]`);
  process.exit(64);
}
const here = new URL('.', import.meta.url).pathname;
const everything = `${here}../node_modules/@modelcontextprotocol/server-everything/dist/index.js`;
const plainServer = `${here}../fastmcp/plain_server.py`;
const TASK_TOOLS = ['tasks_wait', 'tasks_status', 'tasks_cancel', 'tasks_answer', 'tasks_list'];
const WINDOW_S = 2;

let failures = 0;
let passes = 0;
const pass = (name) => {
  passes += 1;
  console.log(`PASS ${name}/${target}`);
};
const fail = (name, why) => {
  failures += 1;
  console.log(`FAIL ${name}/${target}: ${why}`);
};
const note = (line) => console.log(`# ${line}`);
async function check(name, body) {
  const started = Date.now();
  try {
    await body();
    pass(name);
  } catch (error) {
    fail(name, error?.stack ?? String(error));
  }
  note(`${name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
function assert(condition, why) {
  if (!condition) throw new Error(why);
}
const show = (value) => JSON.stringify(value);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));


// Two callers over HTTP (--auth-tokens: one `TOKEN LABEL` a line).
const work = mkdtempSync(join(tmpdir(), 'ts-notasks-'));
const tokensFile = join(work, 'tokens');
const TOKENS = { alice: 'alice-secret-token-1', bob: 'bob-secret-token-2' };
writeFileSync(tokensFile, `${TOKENS.alice} alice\n${TOKENS.bob} bob\n`, { mode: 0o600 });

// The server's flags, with and without the task tools.
const common = ['--store', 'memory', '--poll-interval', '100'];
let upstream = []; // the gateway's --upstream / --upstream-url flags (set in main)
const taskTools = ['--task-tools', '--task-tools-wait', String(WINDOW_S)];
const serveArgs = (withTaskTools) => [...common, ...upstream, ...(withTaskTools ? taskTools : [])];
const urls = {}; // HTTP: the URL of the server with (true) and without (false) the task tools

// Every callTool's duration, for the timeout check.
const durations = [];
let timedOut = 0;

// connect({tools, caller, elicit}): a connected no-tasks client (with the elicitation
// capability and a handler when `elicit` is given) and its tools/list (which also fills
// the SDK's caches: output validators, task-required tools, as a host's listing does).
async function connect({ tools = true, caller = 'alice', elicit } = {}) {
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: 'ts-sdk-v1-notasks-check', version: '1' }, { capabilities });
  const asked = [];
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      return elicit(request.params);
    });
  }
  let clientTransport;
  if (transport === 'stdio') {
    clientTransport = new StdioClientTransport({ command: bin, args: ['serve', '--stdio', ...serveArgs(tools)], stderr: 'inherit' });
  } else {
    const headers = { Authorization: `Bearer ${TOKENS[caller]}` };
    clientTransport = new StreamableHTTPClientTransport(new URL(urls[tools]), { requestInit: { headers } });
  }
  await withTimeout(client.connect(clientTransport), 30000, 'connect');
  const listed = (await client.listTools()).tools;
  // call(NAME, ARGS): callTool with the default options; its duration is kept.
  const call = async (name, args = {}) => {
    const started = Date.now();
    try {
      return await client.callTool({ name, arguments: args });
    } catch (error) {
      if (error?.code === -32001) timedOut += 1;
      throw error;
    } finally {
      durations.push({ name, ms: Date.now() - started });
    }
  };
  return { client, listed, asked, call };
}

const text = (result) => result?.content?.find((block) => block.type === 'text')?.text;
// isHandle(RESULT): the call (or tasks_wait) answered with a handle, a task that has not
// ended, rather than the tool's result.
const isHandle = (result) =>
  typeof result?.structuredContent?.taskId === 'string' && ['working', 'input_required'].includes(result.structuredContent.status) && typeof result.structuredContent.next === 'string';
// The handle's `next`: tasks_wait, or tasks_answer while the task waits for input (the server
// chose this; issue 52's first contract said tasks_wait for both).
const nextFor = (status) => (status === 'input_required' ? 'tasks_answer' : 'tasks_wait');
// handleOf(RESULT, TOOL, STATUS): the handle's structuredContent, after checking its shape.
function handleOf(result, tool, status) {
  const handle = result?.structuredContent;
  assert(!result.isError, `isError: ${show(result)}`);
  assert(isHandle(result), `not a handle: ${show(result)}`);
  assert(handle.status === status && handle.tool === tool && handle.next === nextFor(status), `status/tool/next: ${show(handle)}`);
  assert(Number.isFinite(handle.suggestedWaitSeconds), `suggestedWaitSeconds: ${show(handle)}`);
  assert(result._meta?.['io.github.mcp-tasks/handle']?.taskId === handle.taskId, `_meta: ${show(result._meta)}`);
  const said = result.content?.[0]?.text ?? '';
  assert(said.includes(handle.taskId) && said.includes('tasks_wait'), `content[0] text: ${show(said)}`);
  return handle;
}
// waitFor(CALL, ID): tasks_wait (timeoutSeconds 20) until it answers something else than a
// task still working (at most 3 times); the last answer.
async function waitFor(call, taskId) {
  let result;
  for (let i = 0; i < 3; i += 1) {
    result = await call('tasks_wait', { taskId, timeoutSeconds: 20 });
    if (result?.structuredContent?.status !== 'working') break;
  }
  return result;
}
// statusOf(CALL, ID): tasks_status's structuredContent.
async function statusOf(call, taskId) {
  const result = await call('tasks_status', { taskId });
  assert(!result.isError, `tasks_status isError: ${show(result)}`);
  return result.structuredContent;
}
// until(SECONDS, PROBE): PROBE every 200 ms until it returns truthy; its last value.
async function until(seconds, probe) {
  const end = Date.now() + seconds * 1000;
  let value;
  do {
    value = await probe();
    if (value) return value;
    await sleep(200);
  } while (Date.now() < end);
  return value;
}
// fill(SCHEMA): an elicitation answer's content fitting a requested (flat) schema.
function fill(schema) {
  const content = {};
  for (const [key, property] of Object.entries(schema?.properties ?? {})) {
    if (property.type === 'boolean') content[key] = true;
    else if (property.type === 'number' || property.type === 'integer') content[key] = property.minimum ?? 1;
    else if (property.enum) content[key] = property.enum[0];
    else content[key] = 'yes';
  }
  return content;
}
// argsFor(TOOL, WANTED): WANTED, checked against the tool's input schema from tools/list.
function argsFor(listed, name, wanted) {
  const tool = listed.find((t) => t.name === name);
  assert(tool, `${name} not listed`);
  for (const key of tool.inputSchema?.required ?? []) assert(key in wanted, `${name} requires ${key}: ${show(tool.inputSchema)}`);
  for (const key of Object.keys(wanted)) assert(key in (tool.inputSchema?.properties ?? {}), `${name} has no ${key}: ${show(tool.inputSchema)}`);
  return wanted;
}
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

async function demoChecks() {
  const alice = await connect();
  const plain = await connect({ tools: false });
  const { call, listed, client } = alice;

  await check('tools', async () => {
    const names = listed.map((tool) => tool.name);
    for (const name of TASK_TOOLS) assert(names.includes(name), `${name} not in ${show(names)}`);
    const others = plain.listed.map((tool) => tool.name);
    assert(!others.some((name) => TASK_TOOLS.includes(name)), `without --task-tools: ${show(others)}`);
    for (const name of ['long_job', 'confirm_action', 'failing_tool', 'sleep']) {
      const tool = listed.find((t) => t.name === name);
      assert(tool && !tool.outputSchema && tool.execution?.taskSupport !== 'required', `${name}: ${show(tool)}`);
    }
  });

  await check('window', async () => {
    const short = await call('sleep', { ms: 50 });
    assert(!isHandle(short) && text(short) === 'slept 50 ms', `sleep 50: ${show(short)}`);
    const started = Date.now();
    const result = await call('sleep', argsFor(listed, 'sleep', { ms: 10000 }));
    const took = Date.now() - started;
    const handle = handleOf(result, 'sleep', 'working');
    assert(took >= WINDOW_S * 1000 - 200 && took < 6000, `the handle came after ${took} ms`);
    const waited = Date.now();
    const done = await call('tasks_wait', { taskId: handle.taskId, timeoutSeconds: 20 });
    note(`window: the handle after ${seconds(took)}, tasks_wait answered after ${seconds(Date.now() - waited)} more`);
    assert(!done.isError && !isHandle(done), `tasks_wait: ${show(done)}`);
    assert(text(done) === text(short).replace('50', '10000'), `tasks_wait: ${show(done)} (a short sleep: ${show(short)})`);
    assert(isDeepStrictEqual(Object.keys(done).sort(), Object.keys(short).sort()), `keys: ${show(done)} vs ${show(short)}`);
    const again = await call('tasks_wait', { taskId: handle.taskId, timeoutSeconds: 20 });
    assert(isDeepStrictEqual(again, done), `tasks_wait again: ${show(again)}, first ${show(done)}`);
  });

  await check('fast', async () => {
    const ours = await call('sleep', { ms: 50 });
    const theirs = await plain.call('sleep', { ms: 50 });
    assert(isDeepStrictEqual(ours, theirs), `with --task-tools ${show(ours)}, without ${show(theirs)}`);
  });

  await check('cancel', async () => {
    const handle = handleOf(await call('sleep', { ms: 60000 }), 'sleep', 'working');
    const cancel = await call('tasks_cancel', { taskId: handle.taskId });
    assert(!cancel.isError && cancel.structuredContent?.taskId === handle.taskId, `tasks_cancel: ${show(cancel)}`);
    const status = await until(5, async () => {
      const seen = await statusOf(call, handle.taskId);
      return seen.status === 'cancelled' ? seen : null;
    });
    assert(status?.status === 'cancelled', `tasks_status: ${show(await statusOf(call, handle.taskId))}`);
    const waited = await call('tasks_wait', { taskId: handle.taskId, timeoutSeconds: 5 });
    assert(waited.isError && waited.structuredContent?.status === 'cancelled', `tasks_wait: ${show(waited)}`);
  });

  await check('sdk-timeout', async () => {
    const before = new Set((await call('tasks_list', {})).structuredContent?.tasks?.map((task) => task.taskId));
    const timedOutCall = client.callTool({ name: 'sleep', arguments: { ms: 60000 } }, undefined, { timeout: 1000 }).then(
      (result) => ({ result }),
      (error) => ({ error })
    );
    await sleep(400);
    const listed = (await call('tasks_list', {})).structuredContent?.tasks ?? [];
    const task = listed.find((t) => !before.has(t.taskId) && t.tool === 'sleep');
    assert(task?.status === 'working', `tasks_list during the window: ${show(listed)}`);
    const { result, error } = await timedOutCall;
    assert(error?.code === -32001, `the call with timeout 1000: ${show(result ?? String(error))}`);
    const status = await until(5, async () => {
      const seen = await statusOf(call, task.taskId);
      return seen.status === 'cancelled' ? seen : null;
    });
    assert(status, `after the SDK's timeout (notifications/cancelled): ${show(await statusOf(call, task.taskId))}`);
  });

  await check('input-tool', async () => {
    const started = Date.now();
    const result = await call('confirm_action', argsFor(listed, 'confirm_action', { action: 'ship it' }));
    note(`input-tool: the handle after ${seconds(Date.now() - started)}`);
    const handle = handleOf(result, 'confirm_action', 'input_required');
    const requests = Object.entries(handle.inputRequests ?? {});
    assert(requests.length === 1, `inputRequests: ${show(handle)}`);
    const [key, request] = requests[0];
    assert(request.method === 'elicitation/create' && request.params?.requestedSchema, `request: ${show(request)}`);
    assert(text(result).includes('tasks_answer'), `text: ${show(text(result))}`);
    const status = await statusOf(call, handle.taskId);
    assert(status.status === 'input_required' && status.inputRequests?.[key], `tasks_status: ${show(status)}`);
    const list = await call('tasks_list', {});
    const mine = list.structuredContent?.tasks?.find((task) => task.taskId === handle.taskId);
    assert(mine?.status === 'input_required', `tasks_list: ${show(list)}`);
    const content = fill(request.params.requestedSchema);
    const answered = await call('tasks_answer', { taskId: handle.taskId, answers: { [key]: { action: 'accept', content } } });
    assert(!answered.isError && answered.structuredContent?.taskId === handle.taskId, `tasks_answer ${show(content)}: ${show(answered)}`);
    const done = await waitFor(call, handle.taskId);
    assert(!done.isError && text(done) === 'confirmed: ship it', `tasks_wait: ${show(done)}`);
  });

  await check('input-session', async () => {
    const asking = await connect({ elicit: (params) => ({ action: 'accept', content: fill(params.requestedSchema) }) });
    const started = Date.now();
    let result = await asking.call('confirm_action', { action: 'deploy' });
    const how = isHandle(result) ? `a handle (${result.structuredContent.status}) after ${seconds(Date.now() - started)}` : `the result after ${seconds(Date.now() - started)}`;
    note(`input-session: the call answered ${how}`);
    if (isHandle(result)) result = await waitFor(asking.call, result.structuredContent.taskId);
    assert(!result.isError && text(result) === 'confirmed: deploy', `result: ${show(result)}`);
    assert(asking.asked.length === 1 && asking.asked[0].requestedSchema, `asked: ${show(asking.asked)}`);
    await asking.client.close();
  });

  if (transport === 'http') {
    await check('foreign', async () => {
      const bob = await connect({ caller: 'bob' });
      const handle = handleOf(await call('sleep', { ms: 30000 }), 'sleep', 'working');
      const id = handle.taskId;
      const madeUp = `${'0'.repeat(Math.max(id.length - 4, 0))}beef`;
      const same = (a, b) => isDeepStrictEqual(JSON.parse(show(a).replaceAll(id, 'ID')), JSON.parse(show(b).replaceAll(madeUp, 'ID')));
      for (const tool of ['tasks_status', 'tasks_cancel', 'tasks_wait']) {
        const extra = tool === 'tasks_wait' ? { timeoutSeconds: 1 } : {};
        const theirs = await bob.call(tool, { taskId: id, ...extra });
        const none = await bob.call(tool, { taskId: madeUp, ...extra });
        assert(theirs.isError && none.isError, `${tool}: ${show(theirs)} / made up: ${show(none)}`);
        assert(same(theirs, none), `${tool}: alice's id ${show(theirs)}, a made-up id ${show(none)}`);
      }
      const list = await bob.call('tasks_list', {});
      assert(!show(list).includes(id), `in bob's tasks_list: ${show(list)}`);
      const status = await statusOf(call, id);
      assert(status.status === 'working', `alice's task: ${show(status)}`);
      await call('tasks_cancel', { taskId: id });
      await bob.client.close();
    });
  }
  await alice.client.close();
  await plain.client.close();
}

async function gatewayChecks() {
  const alice = await connect();
  const { call, listed } = alice;
  await check('tools', async () => {
    const names = listed.map((tool) => tool.name);
    for (const name of TASK_TOOLS) assert(names.includes(name), `${name} not in ${show(names)}`);
  });
  // handleThenResult(NAME, TOOL, ARGS, CHECK): a call of about 10 s: handle, tasks_wait, CHECK(result).
  async function handleThenResult(name, tool, args, good) {
    await check(name, async () => {
      const started = Date.now();
      const handle = handleOf(await call(tool, args), tool, 'working');
      const took = Date.now() - started;
      assert(took < 6000, `the handle came after ${took} ms`);
      const done = await waitFor(call, handle.taskId);
      note(`${name}: the handle after ${seconds(took)}, the result after ${seconds(Date.now() - started)}`);
      assert(!done.isError && !isHandle(done) && good(done), `tasks_wait: ${show(done)}`);
    });
  }
  if (profile === 'everything') {
    const tool = listed.find((t) => t.name.endsWith('trigger-long-running-operation'))?.name ?? 'trigger-long-running-operation';
    await handleThenResult('long-op', tool, { duration: 10, steps: 5 }, (result) => /completed/i.test(text(result) ?? '') && /10/.test(text(result)));
  } else {
    await handleThenResult('nap', 'nap', { seconds: 10 }, (result) => text(result) === 'slept 10 s');
    await check('nap-cancel', async () => {
      const before = text(await call('naps_cancelled', {}));
      const handle = handleOf(await call('nap', { seconds: 60 }), 'nap', 'working');
      const cancel = await call('tasks_cancel', { taskId: handle.taskId });
      assert(!cancel.isError, `tasks_cancel: ${show(cancel)}`);
      const status = await until(5, async () => {
        const seen = await statusOf(call, handle.taskId);
        return seen.status === 'cancelled' ? seen : null;
      });
      assert(status, `tasks_status: ${show(await statusOf(call, handle.taskId))}`);
      const want = String(Number(before) + 1);
      const after = await until(5, async () => {
        const count = text(await call('naps_cancelled', {}));
        return count === want ? count : null;
      });
      assert(after === want, `naps_cancelled ${before} before, ${text(await call('naps_cancelled', {}))} after`);
    });
  }
  await alice.client.close();
}

try {
  if (profile === 'everything') upstream = ['--upstream', `node ${everything} stdio`];
  if (profile === 'plain') {
    // Over its HTTP, for both of the gateway's transports: one process whose count of cancelled
    // naps outlives the connection. (A stdio upstream's process is ended with its connection,
    // which the gateway closes after sending notifications/cancelled: its count goes with it.)
    upstream = ['--upstream-url', await start('the fastmcp server', python, [plainServer, 'http', '127.0.0.1:0'])];
  }
  if (transport === 'http') {
    const auth = ['--http', '127.0.0.1:0', '--auth-tokens', tokensFile];
    urls[true] = await start('the server', bin, ['serve', ...auth, ...serveArgs(true)]);
    if (profile === 'demo') urls[false] = await start('the server without --task-tools', bin, ['serve', ...auth, ...serveArgs(false)]);
  }
  if (profile === 'demo') await demoChecks();
  else await gatewayChecks();
  await check('timeout', async () => {
    const longest = durations.reduce((a, b) => (b.ms > a.ms ? b : a), { name: 'none', ms: 0 });
    note(`timeout: ${durations.length} calls, the longest ${longest.name} ${seconds(longest.ms)}`);
    assert(timedOut === 0, `${timedOut} call(s) failed with -32001`);
    assert(longest.ms < 30000, `${longest.name} took ${longest.ms} ms`);
  });
} catch (error) {
  fail('run', error?.stack ?? String(error));
} finally {
  stopAll();
  rmSync(work, { recursive: true, force: true });
}
console.log(`# ${passes} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
