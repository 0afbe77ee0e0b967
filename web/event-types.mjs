// The event-type catalog and the endpoint form's event-type picker, in a real browser
// (Debian's Chromium driven by playwright-core) against a live `hookd serve`, by clicking only:
// sign up → create an application → Event types → a refused schema explains itself under its
// field → create one with a schema and an example → edit it → archive another → add an
// endpoint with the picker (filter box, checkbox) → the endpoint page shows its event types →
// the tenant copies a portal link from the dashboard, the customer opens it in a browser of
// their own and adds an endpoint with the same picker (archived types not offered).
// Screenshots of the catalog at 1440 and 375 px go to web/screenshots; axe-core checks each
// page; nothing scrolls sideways at 375 px.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  assertAccessible, createApp, freePort, go, looks, launchBrowser, runSuite, shot, signUp, start, step, waitUp,
  watchErrors,
} from './support.mjs';

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'hookd-web-event-types-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  start(['serve'], {
    HOOKD_DATABASE_URL: `sqlite://${join(dir, 'hookd.db')}`,
    HOOKD_BIND: `127.0.0.1:${port}`,
    HOOKD_ROLES: 'api',
    HOOKD_ENDPOINT_ALLOW_NETWORKS: '127.0.0.0/8',
    HOOKD_LOG_LEVEL: 'warn',
  });
  await waitUp(`${base}/api/v1/health`);

  const browser = await launchBrowser();
  // axe-core is injected as a script, which the pages' CSP would refuse.
  const tenantContext = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 } });
  const page = await tenantContext.newPage();
  const errors = watchErrors(page);

  step('sign up and create an application');
  const key = await signUp(page);
  await createApp(page, 'Storefront');

  step('Event types: an empty catalog, then a refused schema explains itself under its field');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Event types' }), 'the Event types link');
  await page.getByText('No event types yet').waitFor();
  await go(page, page.getByRole('link', { name: 'New event type' }), 'New event type');
  await page.getByLabel('Name').fill('invoice.paid');
  await page.getByLabel('Description').fill('An invoice was paid');
  await page.getByLabel('JSON Schema').fill('["type", "object"]');
  await page.getByLabel('Example payload').fill('{"id": "inv_1", }');
  await go(page, page.getByRole('button', { name: 'Create event type' }), 'Create event type (refused)');
  await page.getByRole('alert').getByText('Please fix the 2 problems shown below').waitFor();
  const schema = page.getByLabel('JSON Schema');
  assert.equal(await schema.getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#schema-error').innerText(), /must be a JSON object/);
  assert.match(await page.locator('#example-error').innerText(), /not valid JSON/);
  assert.equal(await page.getByLabel('Name').inputValue(), 'invoice.paid', 'what was typed is kept');
  await looks(page, 'event-type-refused');
  // The refusal's own 422, which the browser logs as a console error.
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors.splice(0)[0], /422/);

  step('create it with a schema and an example');
  await schema.fill('{"type": "object", "required": ["id"]}');
  await page.getByLabel('Example payload').fill('{"id": "inv_1", "amount": 4200}');
  await go(page, page.getByRole('button', { name: 'Create event type' }), 'Create event type');
  await page.getByText('Event type created').waitFor();
  const stored = await (await fetch(`${base}/api/v1/event-type/invoice.paid`, { headers: { authorization: `Bearer ${key}` } })).json();
  assert.deepEqual(stored.schemas, { 1: { type: 'object', required: ['id'], examples: [{ id: 'inv_1', amount: 4200 }] } });

  step('edit its description from the catalog');
  await go(page, page.locator('.crumbs').getByRole('link', { name: 'Event types' }), 'the crumb Event types');
  await go(page, page.getByRole('link', { name: 'invoice.paid', exact: true }), 'invoice.paid in the catalog');
  await page.getByLabel('Description').fill('An invoice was paid in full');
  await go(page, page.getByRole('button', { name: 'Save changes' }), 'Save changes');
  await page.getByText('Event type saved').waitFor();
  assert.equal(await page.getByLabel('Description').inputValue(), 'An invoice was paid in full');

  step('a second event type, archived: the catalog shows it so');
  await go(page, page.locator('.crumbs').getByRole('link', { name: 'Event types' }), 'the crumb Event types');
  await go(page, page.getByRole('link', { name: 'New event type' }), 'New event type');
  await page.getByLabel('Name').fill('invoice.voided');
  await go(page, page.getByRole('button', { name: 'Create event type' }), 'Create event type');
  await page.getByText('Event type created').waitFor();
  await go(page, page.getByRole('button', { name: 'Archive' }), 'Archive');
  await page.getByText('Event type archived').waitFor();
  await go(page, page.locator('.crumbs').getByRole('link', { name: 'Event types' }), 'the crumb Event types');
  const voided = page.getByRole('row').filter({ hasText: 'invoice.voided' });
  await voided.getByText('Archived').waitFor();
  await page.getByRole('row').filter({ hasText: 'invoice.paid' }).getByText('An invoice was paid in full').waitFor();
  await looks(page, 'event-types');

  step('add an endpoint with the picker: find the type, check it');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Overview' }), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  const picker = page.getByRole('group', { name: 'Event types' });
  assert.ok(await picker.getByRole('radio', { name: 'All event types' }).isChecked(), 'all by default');
  assert.equal(await picker.getByRole('checkbox', { name: 'invoice.voided' }).count(), 0, 'archived: not offered');
  await page.getByLabel('URL').fill('http://127.0.0.1:9/invoices');
  await picker.getByLabel('Find an event type').fill('nothing like it');
  assert.ok(!(await picker.getByRole('checkbox', { name: 'invoice.paid' }).isVisible()), 'the filter hides what does not match');
  await picker.getByLabel('Find an event type').fill('paid');
  await picker.getByRole('checkbox', { name: 'invoice.paid' }).check();
  assert.ok(await picker.getByRole('radio', { name: 'Only the event types checked below' }).isChecked(), 'checking a type chooses "only these"');
  await looks(page, 'event-type-picker');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  assert.equal((await page.locator('#endpoint-event-types').innerText()).trim(), 'invoice.paid');
  await go(page, page.getByRole('link', { name: 'Edit' }), 'Edit');
  assert.ok(await page.getByRole('checkbox', { name: 'invoice.paid' }).isChecked(), 'the edit form shows the choice');

  step('the tenant copies a portal link; the customer opens it in a browser of their own');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Overview' }), 'Overview');
  await go(page, page.getByRole('button', { name: 'Copy portal link' }), 'Copy portal link');
  const link = (await page.locator('#portal-link').innerText()).trim();
  assert.match(link, /\/portal\/#token=hkp_/);
  const customerContext = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const customer = await customerContext.newPage();
  const customerErrors = watchErrors(customer);
  await customer.goto(link);
  await customer.getByRole('heading', { name: 'Storefront' }).waitFor();
  await go(customer, customer.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint (portal)');
  const theirs = customer.getByRole('group', { name: 'Event types' });
  assert.equal(await theirs.getByRole('checkbox', { name: 'invoice.voided' }).count(), 0, 'archived: not offered in the portal');
  await customer.getByLabel('URL').fill('http://127.0.0.1:9/customer');
  await theirs.getByRole('checkbox', { name: 'invoice.paid' }).check();
  await assertAccessible(customer, 'the portal endpoint form');
  await go(customer, customer.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint (portal)');
  await customer.getByText('Endpoint created').waitFor();
  assert.equal((await customer.locator('#endpoint-event-types').innerText()).trim(), 'invoice.paid');

  assert.deepEqual(errors, [], 'no script errors or failed requests in the dashboard');
  assert.deepEqual(customerErrors, [], 'no script errors or failed requests in the portal');
  console.log('ok: event types are made in the catalog and chosen with the picker');
}

await runSuite(main);
