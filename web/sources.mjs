// Inbound sources in the dashboard, in Chromium against a live `hookd serve`, moving as a
// person does: sign up → an application → Sources → a new source (every problem shown under
// its field first) → refused requests sent as a sender would (bad signature, missing header,
// stale timestamp, not JSON, too large) → the source's Requests view lists each with its
// reason and no secret → edit the source (its sealed secret kept) → delete it.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  freePort, go, looks, launchBrowser, mainShows, reloadUntil, runSuite, shot,
  signUp, start, step, waitUp, watchErrors,
} from './support.mjs';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

/** Standard Webhooks headers for `body`, signed with SECRET at `ts` (seconds). */
function signed(id, ts, body) {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  const sig = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${sig}` };
}

/** The problem shown under the field labelled `label`. */
async function problemUnder(page, label) {
  const field = page.getByLabel(label, { exact: false }).first();
  assert.equal(await field.getAttribute('aria-invalid'), 'true', `${label} is marked invalid`);
  const id = await field.getAttribute('aria-describedby');
  return (await page.locator(`#${id}`).textContent()).trim();
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'hookd-web-sources-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  start(['serve'], {
    HOOKD_DATABASE_URL: `sqlite://${join(dir, 'hookd.db')}`,
    HOOKD_BIND: `127.0.0.1:${port}`,
    HOOKD_ROLES: 'api',
    HOOKD_LOG_LEVEL: 'warn',
    HOOKD_MAX_PAYLOAD_BYTES: '4096',
    HOOKD_SECRET_KEYS: 'test:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=',
  });
  await waitUp(`${base}/api/v1/health`);
  const browser = await launchBrowser();
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  const errors = watchErrors(page);

  step('sign up and create an application');
  await signUp(page);
  await page.getByLabel("New application's name").fill('Partner inbox');
  await go(page, page.getByRole('button', { name: 'Create application' }), 'Create application');

  step('Sources → New source; an empty form shows each problem under its field');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Sources', exact: true }), 'Sources in the nav');
  await page.getByText('No sources yet.').waitFor();
  await go(page, page.getByRole('link', { name: 'New source' }), 'New source');
  await page.getByLabel('Secret').fill('');
  await go(page, page.getByRole('button', { name: 'Create source' }), 'Create source (empty)');
  assert.match(await problemUnder(page, 'Forwards to'), /Choose the application/);
  assert.match(await problemUnder(page, 'Secret'), /signing secret/);
  await looks(page, 'source-form-errors');

  step('a bad secret and name are refused by the API\'s rules, under their fields');
  await page.getByLabel('Name', { exact: false }).first().fill('partner inbox!');
  await page.getByLabel('Forwards to').selectOption({ label: 'Partner inbox' });
  await page.getByLabel('Event type').fill('partner.event');
  await page.getByLabel('Secret').fill('not-a-secret');
  await go(page, page.getByRole('button', { name: 'Create source' }), 'Create source (bad name)');
  assert.match(await problemUnder(page, 'Name'), /name/i);
  await page.getByLabel('Name', { exact: false }).first().fill('partner');
  await page.getByLabel('Secret').fill('not-a-secret');
  await go(page, page.getByRole('button', { name: 'Create source' }), 'Create source (bad secret)');
  assert.match(await problemUnder(page, 'Secret'), /whsec_/);

  step('a good source is created');
  await page.getByLabel('Name', { exact: false }).first().fill('partner');
  await page.getByLabel('Secret').fill(SECRET);
  await go(page, page.getByRole('button', { name: 'Create source' }), 'Create source');
  await page.getByText('Source saved.').waitFor();
  const url = (await page.locator('dd.url').textContent()).trim();
  assert.match(url, /\/in\/src_/);
  const inbound = `${base}${new URL(url).pathname}`;
  assert.ok(!(await page.content()).includes(SECRET.slice(6)), 'the secret is never shown');

  step('a sender\'s refused requests: bad signature, missing header, stale, not JSON, too large');
  const now = Math.floor(Date.now() / 1000);
  const json = { 'content-type': 'application/json' };
  const post = async (headers, body) => {
    try {
      return (await fetch(inbound, { method: 'POST', headers, body })).status;
    } catch (e) {
      return `error ${e.cause?.code || e}`;
    }
  };
  const good = '{"order":1}';
  const bad = { ...signed('evt_bad', now, good), 'webhook-signature': 'v1,AAAAforgedAAAA=', authorization: 'Bearer hk_mustnotshow' };
  assert.equal(await post({ ...json, ...bad }, good), 401);
  assert.equal(await post(json, good), 401);
  assert.equal(await post({ ...json, ...signed('evt_old', now - 3600, good) }, good), 401);
  assert.equal(await post({ ...json, ...signed('evt_text', now, 'hello') }, 'hello'), 400);
  const big = JSON.stringify({ pad: 'x'.repeat(80_000) });
  const tooLarge = await post({ ...json, ...signed('evt_big', now, big) }, big);
  assert.ok(tooLarge === 413 || String(tooLarge).startsWith('error'), `too large: ${tooLarge}`);
  // Accepted requests are not refusals, with or without a Content-Type.
  assert.equal(await post(signed('evt_ok', now, good), good), 200);

  step('the Requests view lists each with its reason');
  const reasons = ['Bad signature', 'Missing header', 'Stale timestamp', 'Not JSON', 'Too large'];
  await reloadUntil(page, 'five refused requests listed', async (p) => {
    const rows = p.locator('table tbody tr');
    return (await rows.count()) === 5;
  });
  const table = (await page.locator('section[aria-labelledby=requests-heading]').innerText());
  for (const r of reasons) assert.ok(table.includes(r), `${r} listed:\n${table}`);
  assert.ok(table.includes('missing header webhook-id'), table);
  assert.ok(table.includes('127.0.0.1'), 'the remote address');
  const html = await page.content();
  for (const secret of ['hk_mustnotshow', 'AAAAforgedAAAA']) {
    assert.ok(!html.includes(secret), `${secret} must not be shown`);
  }
  const badRow = page.locator('tbody tr', { hasText: 'Bad signature' });
  await badRow.locator('summary').click();
  const shown = await badRow.locator('ul.headers').innerText();
  assert.match(shown, /authorization: hidden \(\d+ bytes\)/, shown);
  assert.match(shown, /webhook-signature: hidden/, shown);
  await looks(page, 'source-requests');

  step('the list links to the source; edit it (a bad hold time first)');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Sources', exact: true }), 'Sources in the nav');
  await looks(page, 'sources');
  await go(page, page.getByRole('link', { name: 'partner', exact: true }), 'the source in the list');
  await go(page, page.getByRole('link', { name: 'Edit source' }), 'Edit source');
  assert.equal(await page.getByLabel('Secret').inputValue(), '', 'the sealed secret is not shown');
  await page.getByLabel('Event type').fill('partner.changed');
  await page.getByLabel('Hold time').fill('99999');
  await go(page, page.getByRole('button', { name: 'Save changes' }), 'Save changes (bad)');
  assert.match(await problemUnder(page, 'Hold time'), /3600/);
  await page.getByLabel('Hold time').fill('30');
  await go(page, page.getByRole('button', { name: 'Save changes' }), 'Save changes');
  await page.getByText('Source saved.').waitFor();
  assert.ok((await page.locator('main').innerText()).includes('partner.changed'));
  // The secret left empty was kept: a signed request still verifies.
  assert.equal(await post({ ...json, ...signed('evt_after_edit', Math.floor(Date.now() / 1000), good) }, good), 200);

  step("switch it to one of the vendors' schemes (Slack) in the form; a Slack-signed request verifies");
  await go(page, page.getByRole('link', { name: 'Edit source' }), 'Edit source (again)');
  await page.getByLabel('Scheme').selectOption({ label: 'Slack' });
  const slackSecret = '8f742231b10e8888abcd99yyyzzz85a5';
  await page.getByLabel('Secret').fill(slackSecret);
  await looks(page, 'source-form-slack');
  await go(page, page.getByRole('button', { name: 'Save changes' }), 'Save changes (Slack)');
  await page.getByText('Source saved.').waitFor();
  await go(page, page.getByRole('link', { name: 'Edit source' }), 'Edit source (Slack)');
  assert.equal(await page.getByLabel('Scheme').inputValue(), 'slack', 'the scheme was kept');
  const slackBody = '{"order":2}';
  const slackTs = String(Math.floor(Date.now() / 1000));
  const slackSig = `v0=${createHmac('sha256', slackSecret).update(`v0:${slackTs}:${slackBody}`).digest('hex')}`;
  const slackHeaders = { ...json, 'x-slack-request-timestamp': slackTs, 'x-slack-signature': slackSig };
  assert.equal(await post(slackHeaders, slackBody), 200);
  assert.equal(await post({ ...slackHeaders, 'x-slack-signature': 'v0=00' }, slackBody), 401);
  // The Standard Webhooks signature no longer opens it.
  assert.equal(await post({ ...json, ...signed('evt_after_slack', Math.floor(Date.now() / 1000), '{"order":3}') }, '{"order":3}'), 401);
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Sources', exact: true }), 'Sources in the nav (after Slack)');
  await go(page, page.getByRole('link', { name: 'partner', exact: true }), 'the source in the list (Slack)');

  step('delete it, after confirming');
  let asked = '';
  page.once('dialog', (d) => { asked = d.message(); d.accept(); });
  await go(page, page.getByRole('button', { name: 'Delete source' }), 'Delete source');
  assert.match(asked, /Delete the source “partner”/);
  await page.getByText('Source “partner” deleted.').waitFor();
  await page.getByText('No sources yet.').waitFor();
  assert.equal(await post({ ...json, ...signed('evt_gone', Math.floor(Date.now() / 1000), good) }, good), 404);
  await mainShows(page, 'deleting');

  // A form with problems answers 422 (Chromium logs it); anything else is a fault.
  assert.deepEqual(errors.filter((e) => !e.includes('status of 422')), [], 'no script errors or 5xx');
  step('ok');
}

runSuite(main);
