// The operator page of `mcp-tasks serve --admin` in a real browser
// (Debian's chromium, driven by playwright-core): sign-in, the cookie and
// the CSP, every number of the dashboard against /metrics, the tasks
// table (ids hidden until asked), a cancel from the page, a screenshot,
// sign-out. Run by crates/mcp-tasks-cli/tests/it/operator_page.rs, which
// starts the server and its workload; exits non-zero with what was
// expected and what was seen at the first failure.
//
// Environment:
//   MCP_TASKS_PAGE_URL        the operator listener, e.g. http://127.0.0.1:PORT/
//   MCP_TASKS_OPERATOR_TOKEN  an admin token of it
//   MCP_TASKS_SCREENSHOT      where to write the full-page PNG
//   MCP_TASKS_LIVE_TASKS      optional: how many tasks the workload left
//                             working or input_required
//   MCP_TASKS_TASK_IDS        optional: their ids, comma-separated (never
//                             shown until #show-ids is checked)
//   MCP_TASKS_WORKLOAD_WORDS  optional: words (tool names, principals) the
//                             sign-in page must not show, comma-separated
//   CHROMIUM                  the browser (default /usr/bin/chromium)

import { existsSync, mkdirSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { chromium } from "playwright-core";

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === "") {
    console.error(`check.mjs: set ${name}`);
    process.exit(2);
  }
  return value;
};
const list = (name) =>
  (process.env[name] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);

const PAGE = new URL(env("MCP_TASKS_PAGE_URL"));
const TOKEN = env("MCP_TASKS_OPERATOR_TOKEN");
const SCREENSHOT = env("MCP_TASKS_SCREENSHOT");
const LIVE = process.env.MCP_TASKS_LIVE_TASKS ? Number(process.env.MCP_TASKS_LIVE_TASKS) : null;
const IDS = list("MCP_TASKS_TASK_IDS");
const WORDS = list("MCP_TASKS_WORKLOAD_WORDS");
const COOKIE = "mcp_tasks_operator";
const at = (path) => new URL(path, PAGE).toString();

class Failure extends Error {}

/** Fails step `step`: what was expected and what was seen. */
function fail(step, expected, seen) {
  throw new Failure(`step ${step}: expected ${expected}; saw ${seen}`);
}

function log(message) {
  console.log(`check.mjs: ${message}`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` every 100 ms until it returns a truthy value, for at most `ms`. */
async function until(ms, probe) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) return value;
    await sleep(100);
  }
}

/** The Prometheus text exposition as [{name, labels, value}]. */
function parseMetrics(text) {
  const samples = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
    if (!match) continue;
    const labels = {};
    for (const label of (match[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[label[1]] = label[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[4]) });
  }
  return samples;
}

/** GET /metrics from node with the token. */
async function scrape() {
  const response = await fetch(at("/metrics"), {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const text = await response.text();
  if (response.status !== 200) fail(4, "GET /metrics with the token: 200", `${response.status}: ${text.slice(0, 300)}`);
  return parseMetrics(text);
}

/** The sum of the samples `name` whose labels include `labels`: 0 when none (a counter never incremented). */
function metric(samples, name, labels = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** The value of the gauge `name` with `labels`, which /metrics must show: fails step 4 when it does not. */
function gauge(samples, name, labels = {}) {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length !== 1) {
    fail(4, `one sample ${name}${JSON.stringify(labels)} in /metrics`, `${found.length}`);
  }
  return found[0].value;
}

/** The distinct values of label `label` among the samples `name`. */
function labelValues(samples, name, label) {
  return [...new Set(samples.filter((s) => s.name === name && label in s.labels).map((s) => s.labels[label]))];
}

/** POST /admin/... from node with the token. */
async function admin(path, body) {
  const response = await fetch(at(path), {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Said below.
  }
  return { status: response.status, json, text };
}

const quote = (value) => JSON.stringify(String(value));

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
if (!existsSync(CHROMIUM)) {
  console.error(`check.mjs: no browser at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM)`);
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--no-sandbox"],
  headless: true,
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(10_000);
// What the page itself got wrong: uncaught errors, CSP violations (until
// the sign-out, which may cut a fetch of the dashboard short).
const pageErrors = [];
let watching = true;
let probing = false;
page.on("pageerror", (error) => watching && pageErrors.push(`uncaught: ${error.message}`));
page.on("console", (message) => {
  if (watching && !probing && message.type() === "error" && /content security policy/i.test(message.text())) {
    pageErrors.push(`CSP: ${message.text()}`);
  }
});

/**
 * `fetch(path)` from the page (its cookie, its origin): the status. Where
 * the page's CSP forbids the fetch (a sign-in page needs no connect-src),
 * the same request with the browser's cookies (context.request) instead.
 */
async function statusFromPage(path) {
  // What the page's CSP says of this probe is not the page's own error.
  probing = true;
  try {
    return await page.evaluate(async (p) => (await fetch(p, { cache: "no-store" })).status, path);
  } catch (error) {
    log(`note: fetch(${quote(path)}) from the page failed (${error.message.split("\n")[0]}); asking with the browser's cookies instead`);
    return (await context.request.get(at(path), { maxRedirects: 0 })).status();
  } finally {
    await sleep(300);
    probing = false;
  }
}
const count = (selector) => page.locator(selector).count();
const text = async (selector) => {
  const found = page.locator(selector);
  const n = await found.count();
  if (n !== 1) return { n };
  return { n, text: (await found.innerText()).trim() };
};
const updates = () =>
  page.evaluate(() => {
    const value = document.querySelector("#updated")?.getAttribute("data-updates");
    return value === null || value === undefined ? null : Number(value);
  });
/** Waits until #updated[data-updates] is past `n` (the page fetched its state again). */
async function updateAfter(n, step, ms = 15_000) {
  const seen = await until(ms, async () => {
    const now = await updates();
    return now !== null && now > n ? now : null;
  });
  if (seen === null) fail(step, `#updated[data-updates] past ${n} within ${ms} ms`, `${await updates()}`);
  return seen;
}
const nextUpdate = async (step) => updateAfter(await updates(), step);

/** Checks that the CSP of `response` lets scripts come from 'self' only, never inline. */
function checkCsp(step, response, what) {
  const csp = response.headers()["content-security-policy"];
  if (!csp) fail(step, `a content-security-policy header on ${what}`, "none");
  const directives = Object.fromEntries(
    csp
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name.toLowerCase(), values]),
  );
  const scripts = directives["script-src"];
  if (!scripts || !scripts.includes("'self'")) fail(step, `script-src 'self' in the CSP of ${what}`, csp);
  if (scripts.includes("'unsafe-inline'") || scripts.includes("'unsafe-eval'")) {
    fail(step, `no 'unsafe-inline' (nor 'unsafe-eval') in script-src of ${what}`, csp);
  }
}

async function signedOut(step, what) {
  if ((await count("#signin")) !== 1) fail(step, `${what}: the sign-in form #signin`, `${await count("#signin")} of it; body: ${await bodyText()}`);
  for (const selector of ["#working", "#tasks", "#signout"]) {
    if ((await count(selector)) !== 0) fail(step, `${what}: no ${selector}`, "it is there");
  }
  const body = await bodyText();
  for (const word of WORDS) {
    if (body.includes(word)) fail(step, `${what}: nothing of the workload in the page`, `${quote(word)} in ${quote(body)}`);
  }
  for (const id of IDS) {
    if ((await page.content()).includes(id)) fail(step, `${what}: no task id in the page`, "one");
  }
  const state = await statusFromPage("/ui/state");
  if (state !== 401) fail(step, `${what}: fetch('/ui/state') from the page gets 401`, `${state}`);
}

const bodyText = async () => (await page.evaluate(() => document.body?.innerText ?? "")).slice(0, 2000);

async function main() {
  // 1. Without a token: the sign-in only.
  let response = await page.goto(at("/"));
  if (response.status() !== 200) fail(1, "GET / without a token: 200 and the sign-in page", `${response.status()}`);
  if (!/text\/html/.test(response.headers()["content-type"] ?? "")) {
    fail(1, "GET / to be HTML", response.headers()["content-type"]);
  }
  checkCsp(1, response, "the sign-in page");
  await signedOut(1, "GET / without a token");
  const bare = await fetch(at("/metrics"));
  if (bare.status !== 401) fail(1, "GET /metrics without a token: 401", `${bare.status}`);
  log("1 ok: signed out, the sign-in page only; /ui/state and /metrics 401");

  // 2. A wrong token.
  await page.fill("#token", `${TOKEN}-wrong`);
  const [wrong] = await Promise.all([
    page.waitForNavigation({ waitUntil: "load" }),
    page.click("#signin-submit"),
  ]);
  if (wrong && wrong.status() !== 401) {
    fail(2, "POST /ui/signin with a wrong token: 401", `${wrong.status()}: ${quote(await bodyText())}`);
  }
  if ((await count("#signin-error")) !== 1) fail(2, "#signin-error after a wrong token", `none; body: ${await bodyText()}`);
  await signedOut(2, "after a wrong token");
  if ((await context.cookies()).some((c) => c.name === COOKIE)) fail(2, `no ${COOKIE} cookie after a wrong token`, "one");
  log("2 ok: a wrong token is refused with #signin-error");

  // 3. The right token.
  await page.fill("#token", TOKEN);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#signin-submit")]);
  try {
    await page.locator("#working").waitFor({ state: "attached", timeout: 10_000 });
  } catch {
    fail(3, "the dashboard (#working) after signing in", `body: ${await bodyText()}`);
  }
  const cookie = (await context.cookies()).find((c) => c.name === COOKIE);
  if (!cookie) fail(3, `a cookie named ${COOKIE}`, JSON.stringify((await context.cookies()).map((c) => c.name)));
  if (!cookie.httpOnly) fail(3, `${COOKIE} HttpOnly`, "not HttpOnly");
  if (cookie.sameSite !== "Strict") fail(3, `${COOKIE} SameSite=Strict`, cookie.sameSite);
  if (cookie.value.includes(TOKEN)) fail(3, `${COOKIE} holding a session id, not the admin token`, "the token itself");
  if ((await page.evaluate(() => document.cookie)).includes(COOKIE)) fail(3, `${COOKIE} hidden from scripts`, "document.cookie has it");
  response = await page.goto(at("/"));
  if (response.status() !== 200) fail(3, "GET / signed in: 200", `${response.status()}`);
  checkCsp(3, response, "the dashboard");
  await page.locator("#working").waitFor({ state: "attached" });
  log("3 ok: signed in; the cookie is HttpOnly and SameSite=Strict; script-src 'self' without 'unsafe-inline'");

  // 4. Every number against /metrics, after the page updated itself twice.
  const twice = await until(20_000, async () => ((await updates()) ?? 0) >= 2);
  if (!twice) fail(4, "#updated[data-updates] >= 2 within 20 s", `${await updates()}`);
  const compare = async (samples) => {
    const pairs = [
      ["#working", gauge(samples, "mcp_tasks_tasks_live", { status: "working" })],
      ["#input-required", gauge(samples, "mcp_tasks_tasks_live", { status: "input_required" })],
      ["#queued", gauge(samples, "mcp_tasks_tasks_queued")],
      ["#listen-open", gauge(samples, "mcp_tasks_listen_streams_open")],
      ["#listen-limit", gauge(samples, "mcp_tasks_listen_streams_limit")],
    ];
    for (const tool of labelValues(samples, "mcp_tasks_tasks_created_total", "tool")) {
      // The number, not the bars of its chart (SVG elements of the same class).
      pairs.push([`#tools .tool[data-tool=${quote(tool)}] .created:not(svg *)`, metric(samples, "mcp_tasks_tasks_created_total", { tool })]);
    }
    for (const cause of labelValues(samples, "mcp_tasks_refusals_total", "cause")) {
      pairs.push([`#refusals tr[data-cause=${quote(cause)}] td.total`, metric(samples, "mcp_tasks_refusals_total", { cause })]);
    }
    const wrong = [];
    for (const [selector, want] of pairs) {
      const seen = await text(selector);
      if (seen.n !== 1) wrong.push(`${selector}: expected one element showing ${want}, found ${seen.n}`);
      else if (seen.text !== String(want)) wrong.push(`${selector}: expected ${want} (/metrics), saw ${quote(seen.text)}`);
    }
    return { wrong, checked: pairs.length };
  };
  let samples = await scrape();
  await nextUpdate(4);
  let result = await compare(samples);
  if (result.wrong.length) {
    log(`4: a first read differs, reading again after the next update: ${result.wrong.join("; ")}`);
    samples = await scrape();
    await nextUpdate(4);
    result = await compare(samples);
    if (result.wrong.length) fail(4, "the page's numbers equal /metrics", result.wrong.join("; "));
  }
  const working = metric(samples, "mcp_tasks_tasks_live", { status: "working" });
  const inputRequired = metric(samples, "mcp_tasks_tasks_live", { status: "input_required" });
  if (LIVE !== null && working + inputRequired !== LIVE) {
    fail(4, `/metrics to count the workload's ${LIVE} live tasks`, `${working} working + ${inputRequired} input_required`);
  }
  log(`4 ok: ${result.checked} numbers equal /metrics (${working} working, ${inputRequired} input_required)`);

  // 5. The tasks table.
  const rows = "#tasks tbody tr[data-task]";
  const live = working + inputRequired;
  const counted = await until(15_000, async () => (await count(rows)) === live);
  if (!counted) fail(5, `${live} rows in ${rows} (working + input_required)`, `${await count(rows)}`);
  const tableRows = await page.locator(rows).evaluateAll((trs) =>
    trs.map((tr) => ({
      task: tr.getAttribute("data-task"),
      cells: Object.fromEntries(
        ["tool", "principal", "status", "age", "id"].map((c) => {
          const cell = tr.querySelector(`td.${c}`);
          return [c, cell ? cell.textContent.trim() : null];
        }),
      ),
      cancel: tr.querySelectorAll("button.cancel").length,
    })),
  );
  for (const row of tableRows) {
    const what = JSON.stringify(row);
    if (!/^th_[A-Za-z0-9_-]+$/.test(row.task ?? "")) fail(5, "data-task a keyed hash th_...", what);
    for (const cell of ["tool", "principal", "status", "age"]) {
      if (!row.cells[cell]) fail(5, `a non-empty td.${cell} in each row`, what);
    }
    if (row.cancel !== 1) fail(5, "one button.cancel in each row", what);
    if (row.cells.id) fail(5, "no task id before #show-ids is checked (td.id absent or empty)", what);
  }
  const html = await page.content();
  for (const id of IDS) {
    if (html.includes(id)) fail(5, "no task id anywhere in the page before #show-ids is checked", `${quote(id)} in it`);
  }
  if (await page.isChecked("#show-ids")) fail(5, "#show-ids unchecked at first", "checked");
  await page.check("#show-ids");
  const shown = await until(15_000, async () => {
    const ids = await page.locator(`${rows} td.id`).allTextContents();
    return ids.length === live && ids.every((id) => id.trim()) ? ids.map((id) => id.trim()) : null;
  });
  if (!shown) {
    fail(5, `every row's td.id filled within an update or two of checking #show-ids`, JSON.stringify(await page.locator(`${rows} td.id`).allTextContents()));
  }
  if (IDS.length) {
    const unknown = shown.filter((id) => !IDS.includes(id));
    if (unknown.length) fail(5, "td.id to show the workload's task ids", `${unknown.length} other values`);
  }
  await page.uncheck("#show-ids");
  // The filter: a tool's name leaves its rows only (hidden or removed).
  const visibleRows = () =>
    page.locator(rows).evaluateAll((trs) => trs.filter((tr) => tr.checkVisibility()).map((tr) => tr.getAttribute("data-task")));
  const filterTool = tableRows[tableRows.length - 1].cells.tool;
  const matching = tableRows.filter((r) => r.cells.tool.includes(filterTool)).map((r) => r.task).sort();
  await page.fill("#tasks-filter", filterTool);
  const filtered = await until(5_000, async () => {
    const seen = (await visibleRows()).sort();
    return JSON.stringify(seen) === JSON.stringify(matching) ? seen : null;
  });
  if (!filtered) fail(5, `#tasks-filter ${quote(filterTool)} to leave the rows ${matching.join(", ")}`, (await visibleRows()).join(", "));
  await page.fill("#tasks-filter", "");
  const unfiltered = await until(5_000, async () => (await visibleRows()).length === live);
  if (!unfiltered) fail(5, `all ${live} rows back once #tasks-filter is emptied`, `${(await visibleRows()).length}`);
  log(`5 ok: ${live} rows, hashes only until #show-ids is checked, then the ids; #tasks-filter filters`);

  // 6. A double-click cancels nothing (its second click lands on the
  // confirmation it just armed); then cancel one task from the page.
  const spared = tableRows[1]?.task;
  if (spared) {
    await page.locator(`${rows}[data-task=${quote(spared)}] button.cancel`).dblclick();
    await page.waitForTimeout(1_500);
    const answer = await admin("/admin/tasks/show", { task: spared });
    const status = answer.json?.status;
    if (status === "cancelled" || answer.json?.cancelRequested) fail(6, `a double-click on ${spared}'s cancel cancelling nothing`, quote(status));
    log(`6 ok: a double-click cancelled nothing (${spared} still ${status})`);
  }
  const victim = tableRows[0].task;
  const row = () => page.locator(`${rows}[data-task=${quote(victim)}]`);
  await row().locator("button.cancel").click();
  const confirming = await until(3_000, async () => {
    const label = await row().locator("button.cancel").innerText().catch(() => "");
    return /confirm/i.test(label) ? label : null;
  });
  if (!confirming) {
    fail(6, 'the first click on button.cancel to ask for confirmation ("Confirm" in its text)', quote(await row().locator("button.cancel").innerText().catch((e) => e.message)));
  }
  // A person reads the confirmation before clicking it.
  await page.waitForTimeout(600);
  await row().locator("button.cancel").click();
  let shownStatus = null;
  const cancelled = await until(5_000, async () => {
    const answer = await admin("/admin/tasks/show", { task: victim });
    shownStatus = answer.status === 200 ? answer.json?.status : `${answer.status} ${answer.text.slice(0, 200)}`;
    return shownStatus === "cancelled";
  });
  if (!cancelled) fail(6, `task ${victim} cancelled (POST /admin/tasks/show) within 5 s of the confirmed click`, quote(shownStatus));
  const gone = await until(15_000, async () => (await row().count()) === 0);
  if (!gone) fail(6, `the row of ${victim} gone from the table after its cancel`, "it is still there");
  const error = (await text("#error")).text;
  if (error) log(`6 note: #error says ${quote(error)}`);
  log(`6 ok: ${victim} cancelled from the page; its row is gone`);

  // 7. The screenshot.
  await nextUpdate(7);
  mkdirSync(dirname(SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  log(`7 ok: ${SCREENSHOT}`);

  if (pageErrors.length) fail(7, "no uncaught error nor CSP violation in the page", pageErrors.join(" | "));

  // 8. Sign out.
  watching = false;
  const before = (await context.cookies()).find((c) => c.name === COOKIE);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#signout")]);
  try {
    await page.locator("#signin").waitFor({ state: "attached", timeout: 10_000 });
  } catch {
    fail(8, "the sign-in page after #signout", `body: ${await bodyText()}`);
  }
  await signedOut(8, "after signing out");
  // The session ended on the server: its cookie, sent again, opens nothing.
  if (!before) fail(8, `the ${COOKIE} cookie before signing out`, "none");
  const replay = await fetch(at("/ui/state"), { headers: { cookie: `${COOKIE}=${before.value}` } });
  if (replay.status !== 401) fail(8, "the cookie of before the sign-out refused (401)", `/ui/state ${replay.status}`);
  log("8 ok: signed out; /ui/state is 401 again, the old session's cookie too");

}

let code = 0;
try {
  await main();
  log("all checks passed");
} catch (error) {
  code = 1;
  console.error(`check.mjs: FAILED: ${error instanceof Failure ? error.message : error.stack}`);
  if (pageErrors.length) console.error(`check.mjs: the page's own errors: ${pageErrors.join(" | ")}`);
  try {
    const failed = join(dirname(SCREENSHOT), `${basename(SCREENSHOT, ".png")}-failed.png`);
    mkdirSync(dirname(failed), { recursive: true });
    await page.screenshot({ path: failed, fullPage: true });
    console.error(`check.mjs: the page as it was: ${failed}`);
  } catch {
    // The browser is gone: nothing to show.
  }
} finally {
  await browser.close();
}
process.exit(code);
