// The official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.x) as a host of OUR server behind
// MCP authorization: `mcp-tasks serve --oauth-issuer` trusting the real OpenID provider of
// interop/oidc (oidc-provider, pinned). The SDK's own ClientCredentialsProvider
// (client/auth-extensions.js) and StreamableHTTPClientTransport do the whole discovery: the
// 401's WWW-Authenticate -> the protected resource metadata (RFC 9728) -> the provider's
// metadata -> a token for the resource (RFC 8707); then a task of the 2025-11-25 era.
//
// Usage: node check.mjs MCP_TASKS_BIN
// Prints "PASS name" / "FAIL name: why" per check and exits 1 if any check failed, 64 on bad
// usage. Needs interop/node_modules (npm ci in interop/) and interop/oidc/node_modules
// (npm ci in interop/oidc).
//
// What is checked:
//   challenge   an unauthenticated request is 401 with resource_metadata and scope
//   discovery   the SDK signs in by itself (client credentials, client_secret_basic) and its
//               token names our server as audience and the client as subject
//   task        callToolStream makes a task that completes, with that token
//   foreign     another machine client's token does not see that task (tasks/get -32602, not in its
//               tasks/list; it is in the owner's)
//   refused     a wrong client secret: the SDK's connect fails, no token
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node check.mjs MCP_TASKS_BIN');
  process.exit(64);
}
const here = new URL('.', import.meta.url).pathname;
const SCOPES = 'tasks:read tasks:write';

let failures = 0;
async function check(name, body) {
  try {
    await body();
    console.log(`PASS ${name}`);
  } catch (error) {
    failures += 1;
    console.log(`FAIL ${name}: ${error?.stack ?? String(error)}`);
  }
}
function assert(condition, why) {
  if (!condition) throw new Error(why);
}
const withTimeout = (promise, ms, what) =>
  Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

// Runs `command args`, resolves with the first stdout line `match` accepts.
const children = [];
function startChild(command, args, match) {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const lines = createInterface({ input: child.stdout });
  return withTimeout(
    new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        const found = match(line);
        if (found) resolve(found);
      });
      child.on('exit', (code) => reject(new Error(`${command} exited (${code})`)));
    }),
    30000,
    `${command} start`,
  );
}

const state = mkdtempSync(join(tmpdir(), 'mcp-tasks-oauth-'));
const claimsOf = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());

async function connect(url, issuer, clientId, clientSecret) {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope: SCOPES, expectedIssuer: issuer });
  const client = new Client({ name: 'ts-sdk-v1-oauth-check', version: '1' }, { capabilities: { tasks: { list: {}, cancel: {} } } });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  await withTimeout(client.connect(transport), 30000, 'connect');
  return { client, authProvider };
}

try {
  const provider = await startChild(process.execPath, [join(here, '../oidc/provider.mjs'), '--state', state, '--parent-stdin'],
    (line) => (line.startsWith('{') ? JSON.parse(line) : undefined));
  const url = await startChild(bin, ['serve', '--http', '127.0.0.1:0', '--store', 'memory', '--poll-interval', '100',
    '--oauth-issuer', provider.issuer, '--oauth-scopes', SCOPES], (line) => line.match(/^listening on (\S+)/)?.[1]);

  await check('challenge', async () => {
    const answer = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
    });
    const challenge = answer.headers.get('www-authenticate') ?? '';
    assert(answer.status === 401, `status ${answer.status}`);
    const origin = new URL(url).origin;
    assert(challenge.includes(`resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`), challenge);
    assert(challenge.includes(`scope="${SCOPES}"`), challenge);
  });

  let alice;
  await check('discovery', async () => {
    alice = await connect(url, provider.issuer, 'machine-carol', 'machine-carol-secret');
    const token = alice.authProvider.tokens()?.access_token;
    assert(token, 'the SDK holds a token');
    const claims = claimsOf(token);
    assert(claims.aud === url, `aud ${claims.aud}`);
    assert(claims.sub === 'machine-carol' && claims.iss === provider.issuer, `sub ${claims.sub} iss ${claims.iss}`);
    assert(claims.scope === SCOPES, `scope ${claims.scope}`);
  });

  let taskId;
  await check('task', async () => {
    assert(alice, 'no client (discovery failed)');
    const messages = [];
    const stream = alice.client.experimental.tasks.callToolStream({ name: 'long_job', arguments: { steps: 2, step_ms: 50 } },
      CallToolResultSchema, { task: { ttl: 60000 }, timeout: 60000 });
    for await (const message of stream) messages.push(message);
    const kinds = messages.map((message) => message.type);
    assert(kinds[0] === 'taskCreated' && kinds.at(-1) === 'result', kinds.join(','));
    taskId = messages[0].task.taskId;
    const text = messages.at(-1).result?.content?.find((block) => block.type === 'text')?.text;
    assert(text === 'done: 2 steps', JSON.stringify(messages.at(-1)));
    const task = await alice.client.experimental.tasks.getTask(taskId);
    assert(task.status === 'completed', JSON.stringify(task));
  });

  await check('foreign', async () => {
    assert(taskId, 'no task (task failed)');
    // Another machine client, machine-bob (client_secret_post, which this SDK provider does
    // not send): its token straight from the provider's token endpoint.
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: 'machine-bob',
      client_secret: 'machine-bob-secret', resource: url, scope: SCOPES });
    const answer = await fetch(`${provider.issuer}/token`, { method: 'POST', body: form });
    const { access_token: token } = await answer.json();
    assert(token, `no token for machine-bob (${answer.status})`);
    const bob = new Client({ name: 'ts-sdk-v1-oauth-check', version: '1' }, { capabilities: { tasks: { list: {}, cancel: {} } } });
    await withTimeout(bob.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 30000, 'connect');
    let code = 'no error';
    try {
      await bob.experimental.tasks.getTask(taskId);
    } catch (error) {
      code = error.code;
    }
    assert(code === -32602, `bob's tasks/get of alice's task: ${code}`);
    const { tasks } = await bob.experimental.tasks.listTasks();
    assert(!tasks.some((task) => task.taskId === taskId), 'alice\'s task is in bob\'s tasks/list');
    const mine = await alice.client.experimental.tasks.listTasks();
    assert(mine.tasks.some((task) => task.taskId === taskId), 'alice\'s task is not in her tasks/list');
  });

  await check('refused', async () => {
    let error;
    try {
      await connect(url, provider.issuer, 'machine-carol', 'a-wrong-secret');
    } catch (caught) {
      error = caught;
    }
    assert(error, 'connect succeeded with a wrong secret');
  });
} catch (error) {
  failures += 1;
  console.log(`FAIL setup: ${error?.stack ?? String(error)}`);
} finally {
  for (const child of children) child.kill();
  rmSync(state, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);
