// The portal as a tenant's customer reads it, in a real browser (Debian's Chromium driven by
// playwright-core) against a live `hookd serve`.
//
// The tenant signs up and brands the portal in Settings (name, logo, a purple too faint for
// the dark theme, dark theme). The customer opens the link and, by clicking only:
//   - sees the tenant's name as the page's text and title, the logo with alt text, and every
//     form field readable in the dark theme (computed contrast ≥ 4.5:1, text and accent);
//   - finds timeout, limits, retry policy and headers behind "Advanced";
//   - provokes each refusal of the endpoint form (a private address, a retry policy missing a
//     part, a bad timeout, an event type not offered) and reads it in plain words: no page
//     names an environment variable, an API path, a JSON field or a parser's words;
//   - after the tenant hides the advanced options, the form has only URL, description and
//     event types.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { freePort, launchBrowser, runSuite, sleep, start, step, waitUp } from './support.mjs';

/** What a customer must never read: settings, API paths, environment variables, JSON field
 * names and the JSON parser's words. */
const OPERATOR_WORDS = /HOOKD_|\/api\/v1|retryPolicy|filterTypes|maxConcurrency|throttleRate|missing field|unknown field|serde|`/;

/** The page's visible text and title hold no operator words. */
async function speaksCustomer(page, where) {
  const text = `${await page.title()}\n${await page.locator('body').innerText()}`;
  const found = text.match(OPERATOR_WORDS);
  assert.equal(found, null, `${where}: the portal says ${found?.[0]} in:\n${text}`);
  assert.ok((await page.locator('main').innerText()).trim().length > 0, `${where}: empty <main>`);
}

/**
 * WCAG contrast of every visible form field's text against its own background, and of the
 * accent (links, buttons) against what it stands on; the lowest of each.
 */
async function contrasts(page) {
  return page.evaluate(() => {
    const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 4).map(Number);
    const lum = ([r, g, b]) => {
      const lin = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    const ratio = (a, b) => {
      const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05);
    };
    // The first opaque background behind `el` (the page's own at the end).
    const behind = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const visible = (el) => el.getClientRects().length > 0;
    const out = { fields: [], accent: [] };
    for (const el of document.querySelectorAll('main input:not([type=hidden]):not([type=checkbox]), main textarea, main select')) {
      if (!visible(el)) continue;
      const style = getComputedStyle(el);
      out.fields.push({ name: el.name, ratio: ratio(rgb(style.color), behind(el)) });
      const ph = rgb(getComputedStyle(el, '::placeholder').color);
      if (el.placeholder) out.fields.push({ name: `${el.name} placeholder`, ratio: ratio(ph, behind(el)) });
    }
    for (const el of document.querySelectorAll('main a, main button')) {
      if (!visible(el)) continue;
      out.accent.push({ what: el.textContent.trim().slice(0, 30), ratio: ratio(rgb(getComputedStyle(el).color), behind(el)) });
    }
    return out;
  });
}

async function assertReadable(page, where) {
  const { fields, accent } = await contrasts(page);
  assert.ok(fields.length > 0, `${where}: no form fields measured`);
  for (const f of fields) assert.ok(f.ratio >= 4.5, `${where}: field ${f.name} at ${f.ratio.toFixed(2)}:1`);
  for (const a of accent) assert.ok(a.ratio >= 4.5, `${where}: "${a.what}" at ${a.ratio.toFixed(2)}:1`);
  const low = Math.min(...fields.map((f) => f.ratio));
  console.log(`  ${where}: ${fields.length} field texts, lowest ${low.toFixed(2)}:1; ${accent.length} links and buttons, lowest ${Math.min(...accent.map((a) => a.ratio)).toFixed(2)}:1`);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'hookd-web-customer-'));
  const apiPort = await freePort();
  const base = `http://127.0.0.1:${apiPort}`;
  start(['serve'], {
    HOOKD_DATABASE_URL: `sqlite://${join(dir, 'hookd.db')}`,
    HOOKD_BIND: `127.0.0.1:${apiPort}`,
    HOOKD_ROLES: 'api',
    HOOKD_LOG_LEVEL: 'warn',
  });
  await waitUp(`${base}/api/v1/health`);

  const browser = await launchBrowser();

  step('the tenant signs up and brands the portal: a faint purple, dark theme');
  const tenant = await (await browser.newContext({
    baseURL: base,
    permissions: ['clipboard-read', 'clipboard-write'],
  })).newPage();
  await tenant.goto('/signup');
  await tenant.getByLabel('Organisation').fill('Acme Shop');
  await tenant.getByLabel('Email').fill('ops@acme.example');
  await tenant.getByLabel('Password').fill('correct horse battery');
  await tenant.getByRole('button', { name: 'Sign up' }).click();
  const key = (await tenant.locator('#api-key').textContent()).trim();
  await tenant.getByRole('button', { name: 'Copy' }).click();
  await tenant.getByRole('button', { name: 'Copied' }).waitFor();
  assert.equal(await tenant.evaluate(() => navigator.clipboard.readText()), key, 'the API key is copied');
  await tenant.getByRole('link', { name: 'Continue to the overview' }).click();
  await tenant.getByRole('navigation').getByRole('link', { name: 'Settings' }).click();
  const portalSettings = tenant.locator('#portal-settings');
  await portalSettings.getByLabel('Display name').fill('Acme Payments');
  await portalSettings.getByLabel('Logo URL').fill('https://logo.invalid/acme.png');
  await portalSettings.getByLabel('Primary colour').fill('#7c3aed');
  await portalSettings.getByLabel('Dark theme').check();
  await portalSettings.getByRole('button', { name: 'Save' }).click();
  await tenant.getByText('Portal settings saved').waitFor();
  await tenant.getByText('#7c3aed is too faint for text on the dark theme').waitFor();

  // The event type and the link come from the tenant's API, as the tenant's backend does it.
  const api = (path, body) => fetch(`${base}/api/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal((await api('/event-type', { name: 'order.paid', description: 'An order was paid' })).status, 201);
  assert.equal((await api('/event-type', { name: 'order.lost', description: 'An order was lost' })).status, 201);
  const access = await api('/auth/app-portal-access/customer-co', { application: { name: 'Customer Co', uid: 'customer-co' } });
  const { url } = await access.json();
  assert.equal(access.status, 200);

  step('the customer opens the link: the tenant\'s name and logo, readable fields');
  const customer = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await customer.newPage();
  await page.goto(url);
  await page.getByRole('heading', { name: 'Customer Co' }).waitFor();
  assert.equal(await page.title(), 'Customer Co · Acme Payments');
  await page.locator('header .brand', { hasText: 'Acme Payments' }).waitFor();
  assert.equal(await page.locator('header .brand img').getAttribute('alt'), 'Acme Payments logo');
  await speaksCustomer(page, 'home');

  await page.getByRole('link', { name: 'Add an endpoint' }).click();
  await page.getByRole('heading', { name: 'New endpoint' }).waitFor();
  assert.equal(await page.locator('textarea[name=retry_policy]').isVisible(), false,
    'the retry policy waits behind Advanced');
  await page.locator('summary', { hasText: 'Advanced' }).click();
  await page.getByLabel('URL').fill('http://169.254.169.254/latest');
  await page.getByLabel('Timeout').fill('5 parsecs');
  await page.getByLabel('Retry policy').fill('{"exponential": {"base": "1s"}}');
  await assertReadable(page, 'the endpoint form, typed into, dark theme');
  await speaksCustomer(page, 'the endpoint form');

  step('each refusal in the customer\'s words; the button is busy while the form is sent');
  // Held back a moment, so the request is seen in flight.
  await page.route('**/endpoint/new', async (route) => { await sleep(700); await route.continue(); });
  const create = page.getByRole('button', { name: 'Create endpoint' });
  await create.click();
  await page.locator('form.htmx-request').waitFor({ timeout: 600 });
  assert.ok(await create.isDisabled(), 'the submit button is disabled while its request is in flight');
  const alert = page.getByRole('alert');
  await alert.waitFor();
  await page.unroute('**/endpoint/new');
  assert.ok(!(await create.isDisabled()), 'the submit button works again once answered');
  await speaksCustomer(page, 'the refused form (address, retry policy, timeout)');
  await alert.getByText('URL: this address is on a private or internal network').waitFor();
  await alert.getByText('Retry policy: this is not a retry schedule we can use').waitFor();
  await alert.getByText(/^Timeout: /).waitFor();
  await assertReadable(page, 'the refused form');

  await page.getByLabel('URL').fill('https://93.184.215.14/hooks');
  // The customer picks two event types; the tenant archives one before the form is sent.
  await page.getByRole('checkbox', { name: 'order.paid' }).check();
  await page.getByRole('checkbox', { name: 'order.lost' }).check();
  await page.getByLabel('Timeout').fill('');
  await page.getByLabel('Retry policy').fill('');
  const archived = await fetch(`${base}/api/v1/event-type/order.lost`, {
    method: 'DELETE', headers: { authorization: `Bearer ${key}` },
  });
  assert.equal(archived.status, 204);
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await alert.getByText(/order\.lost/).waitFor();
  await speaksCustomer(page, 'the refused form (event type)');
  await alert.getByText('Event types: order.lost is not offered here').waitFor();

  await page.getByRole('checkbox', { name: 'order.lost' }).uncheck();
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.getByText('Endpoint created').waitFor();
  await speaksCustomer(page, 'the endpoint page');

  await page.getByRole('link', { name: 'Edit' }).first().click();
  await page.getByRole('heading', { name: 'Edit endpoint' }).waitFor();
  await speaksCustomer(page, 'the edit form');
  await page.locator('.crumbs').getByRole('link', { name: 'Endpoint' }).click();
  await page.getByRole('heading', { name: 'Signing secret' }).waitFor();

  step('the signing secret: revealed, copied with one click');
  await page.getByRole('link', { name: 'Reveal secret' }).click();
  const secret = (await page.locator('#endpoint-secret').textContent()).trim();
  assert.match(secret, /^whsec_/);
  await page.locator('#secret-slot').getByRole('button', { name: 'Copy' }).click();
  await page.locator('#secret-slot').getByRole('button', { name: 'Copied' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);

  step('the tenant hides the advanced options; the customer\'s form is short');
  await tenant.getByRole('navigation').getByRole('link', { name: 'Settings' }).click();
  await portalSettings.getByLabel('Hide advanced endpoint options').check();
  await portalSettings.getByRole('button', { name: 'Save' }).click();
  await tenant.getByText('Portal settings saved').waitFor();
  await page.locator('header .brand').click();
  await page.getByRole('link', { name: 'Add an endpoint' }).click();
  await page.getByRole('heading', { name: 'New endpoint' }).waitFor();
  assert.equal(await page.locator('summary', { hasText: 'Advanced' }).count(), 0);
  for (const name of ['timeout', 'max_concurrency', 'throttle_rate', 'retry_policy', 'headers', 'channels']) {
    assert.equal(await page.locator(`[name=${name}]`).count(), 0, `${name} is hidden`);
  }
  await assertReadable(page, 'the short endpoint form');

  step('the tenant copies a portal link for the customer with one click');
  await tenant.getByRole('navigation').getByRole('link', { name: 'Overview' }).click();
  await tenant.getByRole('button', { name: 'Copy portal link' }).click();
  await tenant.getByRole('heading', { name: 'Portal link' }).waitFor();
  const link = (await tenant.locator('#portal-link').textContent()).trim();
  assert.match(link, /\/portal\/#token=hkp_/);
  await tenant.getByRole('button', { name: 'Copy' }).click();
  await tenant.getByRole('button', { name: 'Copied' }).waitFor();
  assert.equal(await tenant.evaluate(() => navigator.clipboard.readText()), link);
  console.log('ok: the portal speaks to the customer, readably');
}

await runSuite(main);
