#!/usr/bin/env node
// A real OpenID provider on 127.0.0.1 for the OAuth tests of mcp-tasks: the certified
// `oidc-provider` package (pinned in package.json), configured as an authorization server
// for MCP servers, plus a few /_test/ endpoints the tests steer it with. Not for production:
// in-memory storage, fixed test users and secrets, interactions approved without a person.
//
//   node provider.mjs --state DIR [--port 0] [--access-token-ttl 300] [--parent-stdin]
//
// When it listens it prints one JSON line on stdout:
//   {"issuer":"http://127.0.0.1:PORT","pid":N,"port":PORT,"jwks_uri":"...","state":"DIR"}
// DIR receives its keys (see writeKeys): jwks.json (the private JWKS it signs with and
// publishes), keys.json (the current RS256 and ES256 signing keys and a key it never
// publishes: {"rs256"|"es256"|"unknown": {kid, alg, pem, public_pem}}, and each private key
// again as rs256.pem, es256.pem, unknown.pem) so a test can mint tokens with the provider's own
// keys. Started again with the same DIR it reuses the keys there.
//
// The test endpoints (ours, beside oidc-provider's own):
//   GET  /_test/stats                      {"jwks","token","introspection","registration","discovery": counts}
//   POST /_test/jwks?mode=ok|slow|down[&ms=N]   the JWKS answers, answers after N ms (10000), or 503
//   POST /_test/rotate[?retire=1]          a new RS256 signing key (old RS256 keys unpublished with retire=1)
//   POST /_test/resource {"resource","format":"jwt"|"opaque","scope","ttl","alg"}   per resource indicator
//   POST /_test/user?name=alice|bob        who an interaction signs in without a login_hint
//   GET  /interaction/:uid                 the interaction, approved at once (303 on)
// Static clients, users and their secrets: CLIENTS and USERS below. See INTEROP.md (its
// oidc-provider row and quirks) and the test helper crates/mcp-tasks-cli/tests/it/oidc.rs.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { Provider } from 'oidc-provider';
// oidc-provider's own in-memory adapter, one store for every Provider this process builds
// (a key rotation builds a new one; see /_test/rotate). An internal module: the version is pinned.
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';

const args = parseArgs(process.argv.slice(2));
const stateDir = path.resolve(args.state ?? fail('--state DIR is required'));
const port = Number(args.port ?? 0);
const accessTokenTtl = Number(args['access-token-ttl'] ?? process.env.OIDC_ACCESS_TOKEN_TTL ?? 300);

// The people who can sign in. The interaction signs in the one named by `login_hint`,
// else the default user (POST /_test/user?name=bob changes it).
const USERS = new Set(['alice', 'bob']);
let defaultUser = 'alice';
// The scopes every resource offers unless POST /_test/resource says otherwise.
const RESOURCE_SCOPES = (process.env.OIDC_RESOURCE_SCOPES ?? 'tasks:read tasks:write').split(/[ ,]+/).filter(Boolean);
// Per resource indicator: {format: 'jwt'|'opaque', scope: 'a b', ttl: seconds, alg: 'RS256'|'ES256'}.
const resources = new Map();

// Static clients (secrets are test values, known to the tests).
const NATIVE_REDIRECTS = ['http://127.0.0.1/callback', 'http://localhost/callback', 'http://127.0.0.1/oauth/callback',
  'http://127.0.0.1/', 'http://[::1]/callback'];
const CLIENTS = [
  machine('machine-alice'),
  machine('machine-bob'),
  // client_secret_basic, for hosts that authenticate that way (the TypeScript SDK's default).
  { ...machine('machine-carol'), token_endpoint_auth_method: 'client_secret_basic' },
  {
    // A public native client for the authorization code flow with PKCE; a loopback redirect
    // URI matches whatever its port (RFC 8252 §7.3; oidc-provider does this for native clients).
    client_id: 'mcp-tasks-cli',
    application_type: 'native',
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: NATIVE_REDIRECTS,
  },
  {
    // The resource server's credentials for RFC 7662 introspection.
    client_id: 'mcp-tasks-rs',
    client_secret: 'mcp-tasks-rs-secret',
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: [],
    response_types: [],
    redirect_uris: [],
  },
  // The same, authenticating with client_secret_post.
  { ...machine('mcp-tasks-rs-post'), grant_types: [] },
];

function machine(id) {
  return {
    client_id: id,
    client_secret: `${id}-secret`,
    // rmcp's client credentials flow sends the secret in the body.
    token_endpoint_auth_method: 'client_secret_post',
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
  };
}

// ---- keys ------------------------------------------------------------------------------

function newKey(alg) {
  const { privateKey, publicKey } = alg === 'ES256'
    ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = `${alg.toLowerCase()}-${crypto.randomBytes(6).toString('hex')}`;
  return {
    jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' },
    pem: {
      kid,
      alg,
      pem: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      public_pem: publicKey.export({ type: 'spki', format: 'pem' }),
    },
  };
}

// keys = {published: [jwk...] (first RS256 signs), rs256: {kid, alg, pem}, es256, unknown}
function loadOrCreateKeys() {
  const file = path.join(stateDir, 'keys.json');
  const jwksFile = path.join(stateDir, 'jwks.json');
  if (fs.existsSync(file) && fs.existsSync(jwksFile)) {
    const keys = JSON.parse(fs.readFileSync(file, 'utf8'));
    keys.published = JSON.parse(fs.readFileSync(jwksFile, 'utf8')).keys;
    return keys;
  }
  const rs = newKey('RS256');
  const es = newKey('ES256');
  const unknown = newKey('RS256');
  return { published: [rs.jwk, es.jwk], rs256: rs.pem, es256: es.pem, unknown: unknown.pem };
}

function writeKeys(keys) {
  fs.mkdirSync(stateDir, { recursive: true });
  const { published, ...pems } = keys;
  atomicWrite(path.join(stateDir, 'jwks.json'), JSON.stringify({ keys: published }, null, 2));
  atomicWrite(path.join(stateDir, 'keys.json'), JSON.stringify(pems, null, 2));
  // The same private keys as PEM files of their own, for tools other than the tests.
  for (const [name, key] of Object.entries(pems)) atomicWrite(path.join(stateDir, `${name}.pem`), key.pem);
}

function atomicWrite(file, text) {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

// ---- the provider ------------------------------------------------------------------------

const cookieKeys = [crypto.randomBytes(32).toString('base64url')];
const adapter = createMemoryAdapter();

function makeProvider(issuer, keys) {
  const provider = new Provider(issuer, {
    adapter,
    clients: CLIENTS,
    jwks: { keys: keys.published },
    cookies: { keys: cookieKeys },
    async findAccount(_ctx, sub) {
      if (!USERS.has(sub)) return undefined;
      return { accountId: sub, async claims() { return { sub, name: sub, email: `${sub}@example.test` }; } };
    },
    claims: { openid: ['sub'], profile: ['name'], email: ['email'] },
    // The resource scopes too: dynamic registration (rmcp's) may only name scopes listed here,
    // and the metadata's scopes_supported then shows them.
    scopes: ['openid', 'offline_access', 'profile', 'email', ...RESOURCE_SCOPES],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      // Open dynamic client registration (RFC 7591), as rmcp's client registers itself.
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Without `resource` at the token endpoint, a refresh or a code exchange uses the one granted.
        useGrantedResource: () => true,
        async getResourceServerInfo(_ctx, resourceIndicator) {
          const custom = resources.get(resourceIndicator) ?? {};
          const info = {
            scope: custom.scope ?? RESOURCE_SCOPES.join(' '),
            audience: resourceIndicator,
            accessTokenTTL: custom.ttl ?? accessTokenTtl,
            accessTokenFormat: custom.format ?? 'jwt',
          };
          if (info.accessTokenFormat === 'jwt') {
            info.jwt = { sign: { alg: custom.alg ?? 'RS256' } };
          }
          return info;
        },
      },
    },
    // Refresh tokens for every client allowed the grant, offline_access or not.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // PKCE for every authorization code request, public client or not.
    pkce: { required: () => true },
    ttl: {
      AccessToken: accessTokenTtl,
      ClientCredentials: accessTokenTtl,
      RefreshToken: 24 * 3600,
      AuthorizationCode: 60,
      Interaction: 600,
      Session: 24 * 3600,
      Grant: 24 * 3600,
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  });
  // Errors a test may want to see, never tokens (oidc-provider's events carry no token values here).
  provider.on('server_error', (_ctx, error) => console.error(`oidc-provider server_error: ${error?.stack ?? error}`));
  return provider;
}

// The auto-approving interaction: login as login_hint (or the default user), then grant
// everything asked for. Each step answers 303 to oidc-provider's resume URL, so a client
// that follows redirects (sending back the cookies it was given) lands on the redirect_uri.
async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session, grantId } = details;
  if (prompt.name === 'login') {
    const accountId = USERS.has(params.login_hint) ? params.login_hint : defaultUser;
    await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'consent') {
    const grant = grantId
      ? await provider.Grant.find(grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const saved = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId: saved } }, { mergeWithLastSubmission: true });
    return;
  }
  send(res, 400, { error: `no automatic answer to the prompt ${prompt.name}` });
}

// ---- the test knobs ------------------------------------------------------------------------

const stats = { jwks: 0, token: 0, introspection: 0, registration: 0, discovery: 0 };
let jwksMode = 'ok';
let slowMs = 10000;

async function testEndpoint(state, req, res, url) {
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case 'GET /_test/stats':
      return send(res, 200, { ...stats, jwks_mode: jwksMode });
    case 'POST /_test/jwks': {
      const mode = url.searchParams.get('mode');
      if (!['ok', 'slow', 'down'].includes(mode)) return send(res, 400, { error: 'mode=ok|slow|down' });
      jwksMode = mode;
      if (url.searchParams.has('ms')) slowMs = Number(url.searchParams.get('ms'));
      return send(res, 200, { jwks_mode: jwksMode, slow_ms: slowMs });
    }
    case 'POST /_test/rotate': {
      // oidc-provider reads its keys once, when built: a rotation builds a new Provider with
      // a new RS256 key first (the one it signs with), the old keys still published unless
      // retire=1, and swaps it in on the same port. Sessions, grants, tokens and registered
      // clients live in oidc-provider's in-process memory adapter, shared by both.
      const fresh = newKey('RS256');
      const keep = url.searchParams.get('retire') === '1'
        ? state.keys.published.filter((jwk) => jwk.alg !== 'RS256')
        : state.keys.published;
      state.keys = { ...state.keys, published: [fresh.jwk, ...keep], rs256: fresh.pem };
      writeKeys(state.keys);
      state.provider = makeProvider(state.issuer, state.keys);
      state.handler = state.provider.callback();
      return send(res, 200, { kid: fresh.pem.kid, published: state.keys.published.map((jwk) => jwk.kid) });
    }
    case 'POST /_test/resource': {
      // Body: {"resource": URI, "format": "jwt"|"opaque", "scope": "a b", "ttl": secs, "alg": "RS256"|"ES256"}
      const body = JSON.parse(await readBody(req) || '{}');
      if (typeof body.resource !== 'string') return send(res, 400, { error: 'resource is required' });
      const { resource, ...custom } = body;
      resources.set(resource, custom);
      return send(res, 200, { resource, ...custom });
    }
    case 'POST /_test/user': {
      const name = url.searchParams.get('name');
      if (!USERS.has(name)) return send(res, 400, { error: `users: ${[...USERS].join(', ')}` });
      defaultUser = name;
      return send(res, 200, { user: defaultUser });
    }
    default:
      return send(res, 404, { error: 'no such test endpoint' });
  }
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { text += chunk; });
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

// ---- main ------------------------------------------------------------------------------

function parseArgs(list) {
  const out = {};
  for (let i = 0; i < list.length; i += 1) {
    const name = list[i].replace(/^--/, '');
    if (name === 'parent-stdin') out[name] = true;
    else out[name] = list[(i += 1)];
  }
  return out;
}

function fail(message) {
  console.error(`provider.mjs: ${message}`);
  process.exit(2);
}

const state = { keys: loadOrCreateKeys(), provider: undefined, handler: undefined, issuer: undefined };
writeKeys(state.keys);

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  try {
    if (url.pathname.startsWith('/_test/')) {
      await testEndpoint(state, req, res, url);
      return;
    }
    if (url.pathname.startsWith('/interaction/') && req.method === 'GET') {
      await interaction(state.provider, req, res);
      return;
    }
    if (url.pathname === '/jwks') {
      stats.jwks += 1;
      if (jwksMode === 'down') {
        send(res, 503, { error: 'the JWKS endpoint is down (a test asked for it)' });
        return;
      }
      if (jwksMode === 'slow') await new Promise((resolve) => { setTimeout(resolve, slowMs); });
    } else if (url.pathname === '/token') stats.token += 1;
    else if (url.pathname === '/token/introspection') stats.introspection += 1;
    else if (url.pathname === '/reg') stats.registration += 1;
    else if (url.pathname.startsWith('/.well-known/')) stats.discovery += 1;
    state.handler(req, res);
  } catch (error) {
    console.error(`provider.mjs: ${req.method} ${url.pathname}: ${error?.stack ?? error}`);
    if (!res.headersSent) send(res, 500, { error: String(error?.message ?? error) });
    else res.end();
  }
});

server.listen(port, '127.0.0.1', () => {
  const bound = server.address().port;
  state.issuer = `http://127.0.0.1:${bound}`;
  state.provider = makeProvider(state.issuer, state.keys);
  state.handler = state.provider.callback();
  process.stdout.write(`${JSON.stringify({
    issuer: state.issuer, pid: process.pid, port: bound, jwks_uri: `${state.issuer}/jwks`, state: stateDir,
  })}\n`);
});

// With --parent-stdin the provider ends when its stdin closes (the test that started it died).
if (args['parent-stdin']) {
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
