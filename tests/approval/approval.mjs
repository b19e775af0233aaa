// The approval page (#47) in a real browser against a real OpenID Provider: headless
// Chromium (puppeteer-core, Debian's /usr/bin/chromium) signs in at oidc-provider
// (idp.mjs), decides on the bridge's page, and the identical retry of the call is checked
// over Streamable HTTP. Everything listens on 127.0.0.1; the browser resolves no other host.
//
// usage: node approval.mjs BRIDGE_BINARY                 the scenarios; last line
//                                                         "approval: P passed, F failed"
//        node approval.mjs BRIDGE_BINARY --screenshot OUT.png   a PNG of the decision page
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';
import { startIdp, CLIENT_ID, PUBLIC_CLIENT_ID } from './idp.mjs';

const TENANT_A = '00000000-0000-4000-8000-000000000001'; // the --dev token's tenant
const TENANT_B = '00000000-0000-4000-8000-0000000000b2';
const TOOL = 'cyberos.memory.append_audit';
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SCENARIO_MS = 25_000;

const [bin, flag, shotPath] = process.argv.slice(2);
if (!bin || (flag && (flag !== '--screenshot' || !shotPath))) {
  console.error('usage: node approval.mjs BRIDGE_BINARY [--screenshot OUT.png]');
  process.exit(2);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const work = mkdtempSync(path.join(os.tmpdir(), 'approval-'));
const [bridgePort, publicPort, idpPort] = [await freePort(), await freePort(), await freePort()];
const origin = `http://127.0.0.1:${bridgePort}`;
const publicOrigin = `http://127.0.0.1:${publicPort}`;
const idp = await startIdp({
  port: idpPort,
  redirectUri: `${origin}/approve/callback`,
  publicRedirectUri: `${publicOrigin}/approve/callback`,
  tenants: { 'Tenant A': TENANT_A, 'Tenant B': TENANT_B },
});
writeFileSync(path.join(work, 'client-secret'), `${idp.clientSecret}\n`, { mode: 0o600 });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts a bridge on 127.0.0.1:`port` (its own data dir) with `--dev`, the provider as
 * `--jwt-issuer` and `approval` flags; resolves once /healthz answers, with the --dev
 * bearer token (its stderr's second line).
 */
async function startBridge(name, port, approval) {
  const b = { name, origin: `http://127.0.0.1:${port}`, dataDir: path.join(work, name), log: '', exit: null };
  b.proc = spawn(bin, [
    '--dev', '--data-dir', b.dataDir, '--transport', 'http', '--listen', `127.0.0.1:${port}`,
    '--jwt-issuer', idp.issuer, ...approval,
  ], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info' } });
  b.proc.stderr.setEncoding('utf8');
  b.proc.stderr.on('data', (chunk) => { b.log += chunk; });
  b.proc.on('exit', (code, signal) => { b.exit = { code, signal }; });
  bridges.push(b);
  for (let i = 0; ; i++) {
    const lines = b.log.split('\n');
    if (lines.length > 2 && lines[1].trim()) {
      try {
        const r = await fetch(`${b.origin}/healthz`);
        if (r.ok) { b.token = lines[1].trim(); return b; }
      } catch { /* not listening yet */ }
    }
    if (b.exit !== null || i > 150) {
      throw new Error(`the ${name} did not start (${JSON.stringify(b.exit)}):\n${b.log}`);
    }
    await sleep(100);
  }
}

const bridges = [];
let passed = 0;
let failed = 0;
let browser;
async function cleanup() {
  await browser?.close().catch(() => {});
  for (const b of bridges) if (b.exit === null) b.proc.kill('SIGTERM');
  await idp.close();
  rmSync(work, { recursive: true, force: true });
}
// run.sh's `timeout` ends a run that hangs: stop the bridges and the browser with it, and
// say nothing more than that the run failed.
let stopping = false;
const say = (line) => { if (!stopping) console.log(line); };
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => {
    say(`approval: stopped by ${signal}`);
    stopping = true;
    const verdict = `approval: ${passed} passed, ${failed + 1} failed`;
    cleanup().finally(() => {
      console.log(verdict);
      process.exit(1);
    });
  });
}
function logs() {
  return `${bridges.map((b) => `--- ${b.name} stderr\n${b.log}`).join('\n')}\n--- IdP errors\n${JSON.stringify(idp.errors, null, 1)}`;
}

function mint(dataDir, tenant, sub) {
  const r = spawnSync(bin, ['--data-dir', dataDir, 'dev-token', '--tenant', tenant, '--sub', sub], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`dev-token failed: ${r.stderr}`);
  return r.stdout.trim();
}

let main;
let pub;
let tokenA;
let tokenB;
try {
  [main, pub] = await Promise.all([
    startBridge('bridge', bridgePort, [
      '--approval-client-id', CLIENT_ID,
      '--approval-client-secret-file', path.join(work, 'client-secret'),
    ]),
    // A public client: PKCE only, no secret.
    startBridge('public-client bridge', publicPort, ['--approval-client-id', PUBLIC_CLIENT_ID]),
  ]);
  tokenA = main.token;
  tokenB = mint(main.dataDir, TENANT_B, 'local-dev');
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true, // --headless=new
    args: [
      ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
      '--disable-dev-shm-usage',
      '--no-first-run',
      // Only this machine's loopback: no name resolves, 127.0.0.1 is dialed as is.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
} catch (err) {
  console.log(`approval: set-up FAILED\n${err.stack ?? err}\n${logs()}`);
  await cleanup();
  console.log('approval: 0 passed, 1 failed');
  process.exit(1);
}

// --- The MCP side: one stateless POST /mcp per call ------------------------------------

let nextId = 1;
async function call(token, args, at = origin) {
  const r = await fetch(`${at}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: nextId++, method: 'tools/call',
      params: { name: TOOL, arguments: args },
    }),
  });
  const text = await r.text();
  if ((r.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const frames = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)));
    const answer = frames.find((f) => 'result' in f || 'error' in f);
    assert.ok(answer, `no answer in the stream: ${text}`);
    return answer;
  }
  return JSON.parse(text);
}

/** The approval link of a refused call (asserting it was refused for approval). */
function linkOf(frame, at = origin) {
  const data = frame.error?.data;
  assert.equal(data?.class, 'authz_denied', `not refused for approval: ${JSON.stringify(frame)}`);
  const m = new RegExp(`${at}/approve/[0-9a-f]{32}(?![0-9a-f])`).exec(data.hint ?? '');
  assert.ok(m, `no approval link in the hint: ${JSON.stringify(frame)}`);
  return m[0];
}

function ran(frame) {
  return frame.result?.isError === false && typeof frame.result?.structuredContent?.audit_id === 'string';
}

let serial = 0;
/** Arguments no other scenario uses, so each call is its own approval. */
function freshArgs(label) {
  serial += 1;
  return { kind: 'note', body: { scenario: label, n: serial } };
}

// --- The browser side ----------------------------------------------------------------

/**
 * Opens `link` in a fresh browser profile (no IdP session), signs in at the IdP as
 * `user` of organization `tenant`, and returns the page the bridge shows after the
 * callback with its HTTP status.
 */
async function signIn(link, user, tenant) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.goto(link, { waitUntil: 'load' });
  assert.ok(page.url().startsWith(`${idp.issuer}/interaction/`),
    `the link did not lead to the IdP's sign-in: ${page.url()}\n${await page.content()}`);
  await page.type('input[name=login]', user);
  await page.select('select[name=tenant]', tenant);
  const [resp] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load' }),
    page.click('button[type=submit]'),
  ]);
  assert.ok(page.url().startsWith(`${new URL(link).origin}/approve/callback?`),
    `the sign-in did not come back to the bridge: ${page.url()}\n${await page.content()}\n${JSON.stringify(idp.errors)}`);
  return { context, page, status: resp.status() };
}

async function heading(page) {
  return page.$eval('h1', (h) => h.textContent);
}

/** Clicks the decision page's Approve or Deny; the page the bridge answers with. */
async function decide(page, decision) {
  const [resp] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load' }),
    page.click(`form button[name=decision][value=${decision}]`),
  ]);
  return { status: resp.status(), title: await heading(page), text: await page.$eval('body', (b) => b.innerText) };
}

/** Asserts `page` is the decision page for `tenant`'s `user`: the call, and both buttons. */
async function assertDecisionPage(page, status, { tenant, user, link, args }) {
  const body = await page.$eval('body', (b) => b.innerText);
  assert.equal(status, 200, body);
  assert.equal(await heading(page), 'Approve this call?', body);
  for (const want of [TOOL, tenant, user, JSON.stringify(args.body.scenario)]) {
    assert.ok(body.includes(want), `the page does not show ${want}:\n${body}`);
  }
  const action = await page.$eval('form', (f) => f.action);
  assert.equal(action, link, 'the form posts to the approval');
  assert.ok(await page.$('form input[type=hidden][name=token]'), 'a one-time form token');
  assert.ok(await page.$('form button[name=decision][value=approve]'));
  assert.ok(await page.$('form button[name=decision][value=deny]'));
}

/** Asserts the bridge refused `user` (no form) after a sign-in. */
async function assertRefused(page, status) {
  const body = await page.$eval('body', (b) => b.innerText);
  assert.equal(status, 403, body);
  assert.equal(await heading(page), 'Refused', body);
  assert.equal(await page.$('form'), null, `a form for the wrong user:\n${body}`);
  assert.equal(await page.$('input[name=token]'), null);
}

async function post(link, form) {
  const r = await fetch(link, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
    redirect: 'manual',
  });
  return { status: r.status, text: await r.text() };
}

// --- Scenarios -----------------------------------------------------------------------

const scenarios = {
  async 'approve: the retry runs once, the next is refused with a new link'() {
    const args = freshArgs('approve');
    const link = linkOf(await call(tokenA, args));
    assert.equal(linkOf(await call(tokenA, args)), link, 'asking again gives the same link');
    const { context, page, status } = await signIn(link, 'local-dev', TENANT_A);
    await assertDecisionPage(page, status, { tenant: TENANT_A, user: 'local-dev', link, args });
    const done = await decide(page, 'approve');
    assert.equal(done.status, 200, done.text);
    assert.equal(done.title, 'Approved', done.text);
    const first = await call(tokenA, args);
    assert.ok(ran(first), `the approved retry did not run: ${JSON.stringify(first)}`);
    const second = await call(tokenA, args);
    assert.notEqual(linkOf(second), link, 'a second retry needs a new approval');
    await context.close();
  },

  async 'deny: the retry is told the user declined'() {
    const args = freshArgs('deny');
    const link = linkOf(await call(tokenA, args));
    const { context, page, status } = await signIn(link, 'local-dev', TENANT_A);
    await assertDecisionPage(page, status, { tenant: TENANT_A, user: 'local-dev', link, args });
    const done = await decide(page, 'deny');
    assert.equal(done.status, 200, done.text);
    assert.equal(done.title, 'Denied', done.text);
    const retry = await call(tokenA, args);
    assert.ok(!ran(retry), JSON.stringify(retry));
    assert.match(JSON.stringify(retry.error ?? retry.result), /the user declined/, JSON.stringify(retry));
    await context.close();
  },

  async 'another user signed in (mallory; local-dev of tenant B) gets no form'() {
    const args = freshArgs('other-user');
    const link = linkOf(await call(tokenA, args));
    for (const [user, tenant] of [['mallory', TENANT_A], ['local-dev', TENANT_B]]) {
      const { context, page, status } = await signIn(link, user, tenant);
      await assertRefused(page, status);
      await context.close();
    }
    const claims = idp.issued.slice(-2).map((c) => [c.sub, c.tenant_id]);
    assert.deepEqual(claims, [['mallory', TENANT_A], ['local-dev', TENANT_B]],
      'the IdP issued ID tokens for exactly those users');
    assert.equal(linkOf(await call(tokenA, args)), link, 'the call is still waiting');
  },

  async 'a POST without the form token, or with a used one, is 403'() {
    const args = freshArgs('form-token');
    const link = linkOf(await call(tokenA, args));
    assert.equal((await post(link, 'decision=approve')).status, 403, 'no token');
    assert.equal((await post(link, 'token=&decision=approve')).status, 403, 'an empty token');
    assert.equal((await post(link, `token=${'0'.repeat(64)}&decision=approve`)).status, 403, 'a made-up token');
    assert.equal(linkOf(await call(tokenA, args)), link, 'nothing was decided');
    const { context, page, status } = await signIn(link, 'local-dev', TENANT_A);
    await assertDecisionPage(page, status, { tenant: TENANT_A, user: 'local-dev', link, args });
    const token = await page.$eval('form input[name=token]', (i) => i.value);
    assert.match(token, /^[0-9a-f]{64}$/);
    const done = await decide(page, 'approve');
    assert.equal(done.title, 'Approved', done.text);
    const reused = await post(link, `token=${token}&decision=deny`);
    assert.equal(reused.status, 403, `a used form token: ${reused.text}`);
    assert.ok(ran(await call(tokenA, args)), 'the approval stood: the used token denied nothing');
    await context.close();
  },

  async "a plain GET of the link (a model's fetch tool) approves nothing"() {
    const args = freshArgs('plain-get');
    const link = linkOf(await call(tokenA, args));
    // Unfollowed, the link is a 303 to the IdP's authorization endpoint: code flow,
    // PKCE S256, a nonce, scope openid, this bridge's callback.
    const raw = await fetch(link, { redirect: 'manual' });
    assert.equal(raw.status, 303);
    const to = new URL(raw.headers.get('location'));
    assert.equal(`${to.origin}${to.pathname}`, `${idp.issuer}/auth`);
    const q = to.searchParams;
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('client_id'), CLIENT_ID);
    assert.equal(q.get('redirect_uri'), `${origin}/approve/callback`);
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.ok(q.get('code_challenge') && q.get('nonce') && q.get('state'));
    assert.deepEqual(q.get('scope').split(' '), ['openid']);
    // Followed (no cookies, no scripts), it ends at the IdP's sign-in and stops there.
    for (let i = 0; i < 3; i++) {
      const r = await fetch(link);
      const text = await r.text();
      assert.ok(!/Approve this call\?|name="token"/.test(text), `a fetch reached the form:\n${text}`);
    }
    // A callback with a made-up state or code is refused.
    const forged = await fetch(`${origin}/approve/callback?code=x&state=${'a'.repeat(43)}`);
    assert.equal(forged.status, 403);
    assert.equal(linkOf(await call(tokenA, args)), link, 'still waiting, same link');
  },

  async 'four concurrent retries after one approval: exactly one runs'() {
    const args = freshArgs('concurrent');
    const link = linkOf(await call(tokenA, args));
    const { context, page, status } = await signIn(link, 'local-dev', TENANT_A);
    await assertDecisionPage(page, status, { tenant: TENANT_A, user: 'local-dev', link, args });
    assert.equal((await decide(page, 'approve')).title, 'Approved');
    await context.close();
    const frames = await Promise.all([1, 2, 3, 4].map(() => call(tokenA, args)));
    const runs = frames.filter(ran);
    assert.equal(runs.length, 1, `runs: ${JSON.stringify(frames)}`);
    for (const f of frames.filter((f) => !ran(f))) assert.notEqual(linkOf(f), link);
  },

  async "tenant B's link cannot be approved by tenant A's login"() {
    const args = freshArgs('tenant-b');
    const link = linkOf(await call(tokenB, args));
    const a = await signIn(link, 'local-dev', TENANT_A);
    await assertRefused(a.page, a.status);
    await a.context.close();
    assert.equal(linkOf(await call(tokenB, args)), link, "tenant B's call is still waiting");
    // Its own user in its own tenant can: the refusal was the tenant's.
    const b = await signIn(link, 'local-dev', TENANT_B);
    await assertDecisionPage(b.page, b.status, { tenant: TENANT_B, user: 'local-dev', link, args });
    assert.equal((await decide(b.page, 'approve')).title, 'Approved');
    await b.context.close();
    // The same arguments in tenant A are another call, not approved by it.
    assert.notEqual(linkOf(await call(tokenA, args)), link);
    assert.ok(ran(await call(tokenB, args)), "tenant B's approved retry runs");
  },

  async 'a public client (PKCE, no secret) signs in and approves too'() {
    const args = freshArgs('public-client');
    const link = linkOf(await call(pub.token, args, pub.origin), pub.origin);
    const to = new URL((await fetch(link, { redirect: 'manual' })).headers.get('location'));
    assert.equal(to.searchParams.get('client_id'), PUBLIC_CLIENT_ID);
    const { context, page, status } = await signIn(link, 'local-dev', TENANT_A);
    await assertDecisionPage(page, status, { tenant: TENANT_A, user: 'local-dev', link, args });
    assert.equal((await decide(page, 'approve')).title, 'Approved');
    await context.close();
    assert.ok(ran(await call(pub.token, args, pub.origin)), 'the approved retry runs');
  },
};

async function screenshot(out) {
  const args = {
    kind: 'note',
    body: { summary: 'Quarterly access review done', reviewer: 'local-dev', findings: 2 },
  };
  const link = linkOf(await call(tokenA, args));
  const { page, status } = await signIn(link, 'local-dev', TENANT_A);
  assert.equal(status, 200, await page.content());
  await page.setViewport({ width: 900, height: 700 });
  await page.screenshot({ path: out, fullPage: true });
  console.log(`approval: the decision page for ${link} in ${out}`);
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

try {
  if (flag === '--screenshot') {
    await withTimeout(screenshot(shotPath), SCENARIO_MS);
  } else {
    for (const [name, run] of Object.entries(scenarios)) {
      const started = Date.now();
      try {
        await withTimeout(run(), SCENARIO_MS);
        passed += 1;
        say(`approval: ${name}: ok (${Date.now() - started} ms)`);
      } catch (err) {
        failed += 1;
        say(`approval: ${name}: FAILED\n${err.stack ?? err}`);
      }
    }
    for (const b of bridges.filter((b) => b.exit !== null)) {
      failed += 1;
      say(`approval: the ${b.name} exited during the run: ${JSON.stringify(b.exit)}`);
    }
    if (failed) say(logs());
  }
} catch (err) {
  failed += 1;
  say(`approval: FAILED\n${err.stack ?? err}\n${logs()}`);
} finally {
  await cleanup();
}
if (stopping) await new Promise(() => {}); // the signal's handler ends the process
if (flag !== '--screenshot') say(`approval: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
