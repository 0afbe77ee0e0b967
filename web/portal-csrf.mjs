// A portal session cannot be planted from another site, in a real browser (Debian's Chromium
// driven by playwright-core) against a live `hookd serve`.
//
// A customer of tenant Acme has Acme's portal open. An attacker (another tenant, with a portal
// link of its own) serves a page on another site (127.0.0.2, another port) that:
//   1. auto-submits a form posting its token to hookd's /portal/session: hookd refuses it with
//      a page saying so, and the customer's session is unchanged;
//   2. sends the browser to hookd's own portal link page with its token in the fragment (the
//      page's own script then posts it, same-origin): hookd asks before switching, and
//      without the customer's click the session is unchanged.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { freePort, sleep, step, waitUp } from './support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const bin = process.env.HOOKD_BIN || join(root, 'target', 'debug', 'hookd');
const browserPath = process.env.CHROMIUM || '/usr/bin/chromium';

const children = [];
let browser;
let attackerSite;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'hookd-web-csrf-'));
  const apiPort = await freePort();
  const base = `http://127.0.0.1:${apiPort}`;
  const env = {
    PATH: process.env.PATH,
    HOOKD_DATABASE_URL: `sqlite://${join(dir, 'hookd.db')}`,
    HOOKD_BIND: `127.0.0.1:${apiPort}`,
    HOOKD_ROLES: 'api',
    HOOKD_LOG_LEVEL: 'warn',
  };
  // Two tenants: the customer's provider and the attacker (anyone may sign up).
  const tenant = (name) => JSON.parse(execFileSync(bin, ['tenant', 'create', '--name', name,
    '--email', `ops@${name.toLowerCase()}.example`, '--json'], { env }).toString());
  const acme = tenant('Acme');
  const evil = tenant('Evil');
  children.push(spawn(bin, ['serve'], { env, stdio: ['ignore', 'inherit', 'inherit'] }));
  await waitUp(`${base}/api/v1/health`);

  const portalLink = async (key, uid, name) => {
    const r = await fetch(`${base}/api/v1/auth/app-portal-access/${uid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { name, uid } }),
    });
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    return out;
  };
  const victim = await portalLink(acme.api_key, 'customer-co', 'Customer Co');
  const attacker = await portalLink(evil.api_key, 'trap', 'Trap Inc');

  // The attacker's site: another origin and another site (127.0.0.2).
  const attackerPort = await freePort('127.0.0.2');
  const attackerBase = `http://127.0.0.2:${attackerPort}`;
  attackerSite = createHttpServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    if (req.url === '/form') {
      res.end(`<!doctype html><title>Win a prize</title>
        <form method="post" action="${base}/portal/session">
          <input type="hidden" name="token" value="${attacker.token}">
        </form>
        <script>document.forms[0].submit()</script>`);
    } else {
      res.end(`<!doctype html><title>Win a prize</title>
        <script>location.href = ${JSON.stringify(attacker.url)}</script>`);
    }
  });
  await new Promise((ok) => attackerSite.listen(attackerPort, '127.0.0.2', ok));

  browser = await chromium.launch({
    executablePath: browserPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const portalCookie = async () =>
    (await context.cookies(`${base}/portal/`)).find((c) => c.name === 'hookd_portal')?.value;

  step('the customer opens their portal link');
  await page.goto(victim.url);
  await page.getByRole('heading', { name: 'Customer Co' }).waitFor();
  const own = await portalCookie();
  assert.ok(own, 'the portal cookie is set');

  step('a cross-site page auto-submits the attacker\'s token: refused');
  await page.goto(`${attackerBase}/form`);
  await page.waitForURL((u) => u.origin === base);
  await page.waitForLoadState();
  assert.equal(await portalCookie(), own, 'the customer\'s portal session is unchanged');
  await page.getByText('Another website tried to open a portal').waitFor();
  await page.goto(`${base}/portal/`);
  await page.getByRole('heading', { name: 'Customer Co' }).waitFor();
  assert.equal(await page.getByText('Trap Inc').count(), 0);

  step('a cross-site page sends the browser to the attacker\'s portal link: hookd asks first');
  await page.goto(`${attackerBase}/link`);
  await page.getByRole('heading', { name: 'Switch portal?' }).waitFor();
  await page.getByText('You are signed in to the webhook portal of Acme (Customer Co)').waitFor();
  assert.equal(await portalCookie(), own, 'nothing changes before the customer chooses');
  await page.getByRole('link', { name: /^Stay in Acme/ }).click();
  await page.getByRole('heading', { name: 'Customer Co' }).waitFor();
  assert.equal(await portalCookie(), own);
  console.log('ok: no portal session was planted');
}

try {
  await main();
} catch (e) {
  console.error('FAILED:', e);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  if (attackerSite) attackerSite.close();
  for (const c of children) c.kill('SIGTERM');
}
