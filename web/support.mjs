// What every browser suite needs around the browser: hookd processes that stop with the suite,
// a browser, a free port, waiting for a server to answer, a line per step, and moving from
// page to page as a person does (`go`, `reloadUntil`, `openMessage`), never by typing an
// address between steps.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '..');
export const bin = process.env.HOOKD_BIN || join(root, 'target', 'debug', 'hookd');
export const browserPath = process.env.CHROMIUM || '/usr/bin/chromium';
export const shots = join(here, 'screenshots');

const children = [];
let browser;

export function freePort(host = '127.0.0.1') {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, host, () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `url` until it answers 2xx, for at most 30 s. */
export async function waitUp(url) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`${url} did not come up`);
}

export function step(text) {
  console.log(`• ${text}`);
}

/** Starts `hookd <args>`; it is stopped when the suite ends (`runSuite`). */
export function start(args, env) {
  const child = spawn(bin, args, {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(child);
  return child;
}

/** Debian's Chromium, headless; closed when the suite ends. */
export async function launchBrowser() {
  browser = await chromium.launch({
    executablePath: browserPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
  });
  return browser;
}

/** Runs a suite's `main`, reports a failure as the exit code, and stops the browser and hookd. */
export async function runSuite(main) {
  try {
    await main();
  } catch (e) {
    console.error('FAILED:', e);
    process.exitCode = 1;
  } finally {
    if (browser) await browser.close();
    for (const c of children) c.kill('SIGTERM');
  }
}

/** Collects what should never happen in a page: script errors, 5xx answers, missing assets. */
export function watchErrors(page, errors = []) {
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('response', (r) => {
    if (r.status() >= 500 || (r.status() === 404 && r.request().resourceType() !== 'document')) {
      errors.push(`${r.status()} ${r.url()}`);
    }
  });
  return errors;
}

/**
 * Clicks `target` (a locator) as a person does and waits for the page it leads to; fails when
 * that page's `<main>` is missing or shows nothing.
 */
export async function go(page, target, what) {
  await page.evaluate(() => document.querySelector('main')?.setAttribute('data-left', ''));
  await target.click();
  try {
    await page.waitForFunction(() => !document.querySelector('main[data-left]'), null, { timeout: 15_000 });
  } catch {
    throw new Error(`clicking ${what} did not lead anywhere (still at ${page.url()})`);
  }
  await page.waitForLoadState();
  await mainShows(page, `clicking ${what}`);
}

/**
 * Fails unless the page's `<main>` is there and shows visible text. The portal's landing page
 * forwards a signed-in customer to their application (its links to the portal's root lead
 * there): that forward is followed first.
 */
export async function mainShows(page, after) {
  for (let tries = 0; ; tries++) {
    try {
      await page.waitForFunction(() => !document.querySelector('#portal-open[data-home]'), null, { timeout: 15_000 });
      const text = await page.evaluate(() => {
        const main = document.querySelector('main');
        if (!main || !main.checkVisibility()) return '';
        return main.innerText.trim();
      });
      assert.ok(text.length > 0, `an empty <main> after ${after} (${page.url()})`);
      return;
    } catch (e) {
      if (tries > 3 || !String(e).includes('Execution context was destroyed')) throw e;
      await page.waitForLoadState();
    }
  }
}

/** Reloads the current page until `check(page)` holds, for what the dispatcher does in the background. */
export async function reloadUntil(page, what, check, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    await mainShows(page, `waiting for ${what}`);
    if (await check(page)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(300);
    await page.reload();
  }
}

/** Clicks the link to message `id` in a list, reloading the list until the message is in it. */
export async function openMessage(page, id) {
  const link = page.getByRole('link', { name: id, exact: true });
  await reloadUntil(page, `message ${id} listed`, async () => (await link.count()) > 0);
  await go(page, link.first(), `message ${id} in the list`);
}

/** Polls `check()` (not the page) until it holds. */
export async function waitFor(check, what, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(200);
  }
}

/** A full-page screenshot in web/screenshots/`name`.png. */
export async function shot(page, name) {
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/**
 * Signs a new tenant up through the sign-up page and lands on the empty overview; returns
 * the API key the welcome page shows once.
 */
export async function signUp(page, org = 'Acme Shop', email = 'ops@acme.example') {
  await page.goto('/signup');
  await page.getByLabel('Organisation').fill(org);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('correct horse battery');
  await go(page, page.getByRole('button', { name: 'Sign up' }), 'Sign up');
  await page.getByText(`Welcome to hookd, ${org}`).waitFor();
  const key = (await page.locator('#api-key').textContent()).trim();
  assert.match(key, /^\S{20,}$/, 'the API key is shown once');
  await go(page, page.getByRole('link', { name: 'Continue to the overview' }), 'Continue to the overview');
  return key;
}

/** Creates an application from the overview's form and waits for the overview to say so. */
export async function createApp(page, name) {
  await page.getByLabel("New application's name").fill(name);
  await go(page, page.getByRole('button', { name: 'Create application' }), 'Create application');
  await page.getByText('Application created').waitFor();
}

/** The API as the tenant's code calls it: `api(key, 'POST', '/app', body)` → { status, body }. */
export async function api(base, key, method, path, body) {
  const r = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: r.status, body: json, text };
}

let axeSource;

/**
 * Runs axe-core (WCAG 2 A and AA rules) over the page as it is now and returns the serious and
 * critical violations, each as one line: rule, impact, and the first offending elements.
 * axe is evaluated through the browser's debugging protocol, which hookd's
 * Content-Security-Policy (no inline scripts) does not govern, so the pages keep their policy.
 */
export async function axeProblems(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    axeSource ??= readFileSync(join(root, 'web', 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
    await page.evaluate(axeSource);
  }
  const result = await page.evaluate(async () => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    resultTypes: ['violations'],
  }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
}

/** Fails when axe-core finds a serious or critical violation on the page. */
export async function assertAccessible(page, where) {
  const problems = await axeProblems(page);
  assert.deepEqual(problems, [], `${where}: axe-core found serious or critical problems`);
}

/**
 * `hookd serve` on a free port with SQLite in a new temporary directory, delivering to
 * loopback (where `hookd sink` listens), polling every 100 ms; `env` adds or overrides
 * settings. Returns its base URL once it answers.
 */
export async function startServer(env = {}, name = 'hookd-web') {
  const dir = mkdtempSync(join(tmpdir(), `${name}-`));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  start(['serve'], {
    HOOKD_DATABASE_URL: `sqlite://${join(dir, 'hookd.db')}`,
    HOOKD_BIND: `127.0.0.1:${port}`,
    HOOKD_ENDPOINT_ALLOW_NETWORKS: '127.0.0.0/8',
    HOOKD_DELIVERY_POLL_INTERVAL: '100ms',
    HOOKD_LOG_LEVEL: 'warn',
    ...env,
  });
  await waitUp(`${base}/api/v1/health`);
  return base;
}

/**
 * `hookd sink` on a free port: `base`, `report()` (what it received) and `behave(b)` (make
 * it fail, slow down, …: `{ failRate, failStatus, latencyMs, timeoutRate, retryAfter }`).
 */
export async function startSink() {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  start(['sink', '--bind', `127.0.0.1:${port}`], {});
  await waitUp(`${base}/_sink/report`);
  return {
    base,
    report: async () => (await fetch(`${base}/_sink/report`)).json(),
    behave: async (b) => {
      const r = await fetch(`${base}/_sink/behaviour`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b),
      });
      assert.equal(r.status, 200);
    },
  };
}

/**
 * The page as it is now, in both themes at 1440 and 375 px: axe-core finds no serious or
 * critical problem, nothing scrolls sideways at 375 px, and a screenshot
 * (`<name>-<theme>-<width>.png`) is taken each time. Leaves the page light at 1440 px.
 */
export async function looks(page, name) {
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const width of [1440, 375]) {
      await page.setViewportSize({ width, height: 900 });
      await shot(page, `${name}-${scheme}-${width}`);
      await assertAccessible(page, `${name} (${scheme}, ${width} px)`);
      const [scroll, client] = await page.evaluate(() => [
        document.documentElement.scrollWidth, document.documentElement.clientWidth,
      ]);
      assert.ok(scroll <= client, `${name}: ${scroll}px wide in a ${client}px window`);
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1440, height: 900 });
}
