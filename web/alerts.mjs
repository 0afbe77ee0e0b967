// Hearing about trouble, in the dashboard, by clicking only (after the first page): sign up →
// Settings: an operational webhook at a receiver of the test's own (a blank URL is refused under
// the field), its signing secret read off the page → a new endpoint makes hookd send a signed
// `endpoint.created` that verifies with that secret → the endpoint fails: the overview's
// "Endpoints at risk" card lists it with the time left (and the charts count none of the
// operational webhook's deliveries), and its link leads to the endpoint's page → Settings: who
// gets early-warning emails (another address; a blank one is refused under the field) → the operational webhook removed → an endpoint nobody listens at: its
// failed attempt's page, reached from the endpoint's list, gives the cause. Every page it adds
// in both themes at 1440 and 375 px with axe-core (`looks`).
import { createServer as createHttpServer } from 'node:http';
import { createHmac } from 'node:crypto';
import assert from 'node:assert/strict';
import {
  api, createApp, freePort, go, launchBrowser, looks, reloadUntil, runSuite, signUp, startServer,
  startSink, step, waitFor, watchErrors,
} from './support.mjs';

/** A receiver of operational webhooks: keeps each request's headers and body. */
async function startReceiver() {
  const got = [];
  const port = await freePort();
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise((ok) => server.listen(port, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${port}/ops`, got, close: () => server.close() };
}

/** Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` under the secret's key. */
function verifies(secret, { headers, body }) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest('base64');
  return (headers['webhook-signature'] || '').split(' ').includes(`v1,${mac}`);
}

/** Opens the endpoint form's Advanced section (it starts open when a value there is set). */
async function openAdvanced(page) {
  const advanced = page.locator('details', { has: page.locator('summary', { hasText: 'Advanced' }) });
  if (!(await advanced.evaluate((d) => d.open))) await advanced.locator('summary').click();
}

async function main() {
  const sink = await startSink();
  const receiver = await startReceiver();
  const base = await startServer({}, 'hookd-alerts');

  const browser = await launchBrowser();
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: 'UTC' });
  const page = await context.newPage();
  // "Remove" asks first (hx-confirm): say yes.
  page.on('dialog', (d) => d.accept());
  const errors = watchErrors(page);

  step('sign up and create an application');
  const key = await signUp(page);
  await createApp(page, 'Storefront');
  assert.equal(await page.locator('#at-risk').count(), 0, 'no endpoint at risk yet');

  step('Settings: an operational webhook; a blank URL is refused under the field');
  await go(page, page.getByRole('banner').getByRole('link', { name: 'Settings', exact: true }), 'Settings');
  const ops = page.locator('#operational-webhooks');
  await ops.getByText('No operational webhook endpoints.').waitFor();
  await go(page, ops.getByRole('button', { name: 'Add operational webhook' }), 'Add operational webhook (blank)');
  await page.locator('#ops_url-error', { hasText: 'Enter the URL that receives the events.' }).waitFor();
  assert.equal(await page.locator('#ops_url').getAttribute('aria-invalid'), 'true');
  await ops.getByLabel('URL').fill(receiver.url);
  await ops.getByLabel('Description').fill('Pager');
  await go(page, ops.getByRole('button', { name: 'Add operational webhook' }), 'Add operational webhook');
  await page.getByText('Operational webhook endpoint added').waitFor();
  await ops.getByText(receiver.url).waitFor();
  await ops.locator('.badge', { hasText: 'Active' }).waitFor();
  await ops.getByText('Show', { exact: true }).click();
  const secret = (await ops.locator('code.secret').textContent()).trim();
  assert.match(secret, /^whsec_/, 'the signing secret is shown');
  await looks(page, 'settings-operational');

  step('a new endpoint: the operational webhook gets a signed endpoint.created');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  const epUrl = `${sink.base}/hooks/orders`;
  await page.getByLabel('URL').fill(epUrl);
  await page.locator('textarea[name=retry_policy]').fill('{"delays": ["200ms"], "maxAttempts": 2}');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  const [, appId, epId] = new URL(page.url()).pathname.match(/^\/app\/([^/]+)\/endpoint\/([^/?]+)/);
  await waitFor(async () => receiver.got.some((r) => JSON.parse(r.body).type === 'endpoint.created'),
    'endpoint.created at the operational webhook');
  const created = receiver.got.find((r) => JSON.parse(r.body).type === 'endpoint.created');
  assert.ok(verifies(secret, created), 'signed with the secret the Settings page shows');
  assert.equal(JSON.parse(created.body).data.endpointId, epId);

  step("the endpoint fails: the overview lists it at risk, and its link leads to the endpoint");
  await sink.behave({ failRate: 1.0, failStatus: 503 });
  const r = await api(base, key, 'POST', `/app/${appId}/msg`, { eventType: 'order.paid', payload: { n: 1 } });
  assert.equal(r.status, 202, r.text);
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  const atRisk = page.locator('#at-risk');
  await reloadUntil(page, 'the endpoint listed at risk', async () => (await atRisk.count()) > 0);
  await atRisk.getByRole('heading', { name: 'Endpoints at risk' }).waitFor();
  // The default window is 5 days: the time left is days, and the date it happens is given.
  assert.match(await atRisk.locator('.time-left').first().textContent(), /\d+ days?/);
  // The operational webhook's delivery is hookd's, not one of the tenant's: the charts leave it out.
  const deliveries = page.locator('figcaption', { hasText: 'Deliveries per minute' });
  assert.match(await deliveries.textContent(), /: 0 delivered,/, 'only the failing endpoint is counted');
  await looks(page, 'overview-at-risk');
  await go(page, atRisk.getByRole('link', { name: epUrl }), 'the endpoint at risk');
  await page.getByRole('heading', { name: epUrl }).waitFor();
  await page.getByText('Failing since').waitFor();

  step('Settings: warning emails to another address; a blank address is refused under the field');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('banner').getByRole('link', { name: 'Settings', exact: true }), 'Settings');
  const warnings = page.locator('#warnings');
  assert.ok(await warnings.getByRole('radio', { name: 'The notification email (ops@acme.example)' }).isChecked(), 'the notification email by default');
  await warnings.getByRole('radio', { name: 'Another address' }).check();
  await go(page, warnings.getByRole('button', { name: 'Save' }), 'Save (no address)');
  await page.locator('#warn_address-error').waitFor();
  assert.equal(await page.locator('#warn_address').getAttribute('aria-invalid'), 'true');
  await looks(page, 'settings-warnings-refused');
  await warnings.getByRole('textbox', { name: /^Other address/ }).fill('alerts@acme.example');
  await go(page, warnings.getByRole('button', { name: 'Save' }), 'Save');
  await page.getByText('Saved: early warnings go there from the next one.').waitFor();
  assert.ok(await warnings.getByRole('radio', { name: 'Another address' }).isChecked(), 'the choice is kept');
  assert.equal(await warnings.getByRole('textbox', { name: /^Other address/ }).inputValue(), 'alerts@acme.example');
  await warnings.getByRole('radio', { name: 'Nobody' }).check();
  await go(page, warnings.getByRole('button', { name: 'Save' }), 'Save (nobody)');
  assert.ok(await page.locator('#warnings').getByRole('radio', { name: 'Nobody' }).isChecked(), 'nobody is kept');

  step('remove the operational webhook: it gets no more events');
  await go(page, ops.getByRole('button', { name: 'Remove' }), 'Remove');
  await page.getByText('Operational webhook endpoint removed').waitFor();
  await ops.getByText('No operational webhook endpoints.').waitFor();
  const before = receiver.got.length;
  const second = await api(base, key, 'POST', `/app/${appId}/endpoint`, { url: `${sink.base}/hooks/late` });
  assert.equal(second.status, 201, second.text);
  await new Promise((ok) => setTimeout(ok, 1500));
  assert.equal(receiver.got.length, before, 'a removed operational webhook gets nothing');
  receiver.close();

  step("an endpoint nobody listens at: its attempt's page says why, as the log does");
  const closed = `http://127.0.0.1:${await freePort()}/gone`;
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  await page.getByLabel('URL').fill(closed);
  await page.locator('textarea[name=retry_policy]').fill('{"delays": ["200ms"], "maxAttempts": 1}');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  const gone = await api(base, key, 'POST', `/app/${appId}/msg`, { eventType: 'order.paid', payload: { n: 2 } });
  assert.equal(gone.status, 202, gone.text);
  const attemptLink = page.locator('td[data-label=Time] a').first();
  await reloadUntil(page, 'the failed attempt listed', async () => (await attemptLink.count()) > 0);
  await go(page, attemptLink, "the failed attempt's time");
  await page.getByText(/^Cause: connect: .*Connection refused \(127\.0\.0\.1:\d+\)$/).waitFor();
  await looks(page, 'attempt-cause');

  step("that endpoint's form: Send trace context, ticked and saved, stays ticked");
  await go(page, page.locator('dd.url a'), "the attempt's endpoint");
  await go(page, page.getByRole('link', { name: 'Edit', exact: true }), 'Edit the endpoint');
  await openAdvanced(page);
  const trace = page.getByLabel('Send trace context');
  assert.equal(await trace.isChecked(), false, 'off until asked for');
  await trace.check();
  await looks(page, 'endpoint-form-trace');
  await go(page, page.getByRole('button', { name: 'Save changes' }), 'Save changes (trace context)');
  await page.getByText('Endpoint saved.').waitFor();
  const traced = await api(base, key, 'GET', `/app/${appId}/endpoint`);
  assert.ok(traced.body.data.some((e) => e.url === closed && e.sendTraceparent === true), traced.text);
  await go(page, page.getByRole('link', { name: 'Edit', exact: true }), 'Edit the endpoint (again)');
  await openAdvanced(page);
  assert.equal(await page.getByLabel('Send trace context').isChecked(), true, 'the choice was kept');

  // 4xx answers of the refused forms are expected; nothing else may fail.
  const unexpected = errors.filter((e) => !/^4\d\d /.test(e) && !e.includes('status of 4'));
  assert.deepEqual(unexpected, [], 'no script errors or 5xx answers');
  console.log('ok: operational webhooks, endpoints at risk, early-warning recipients');
}

await runSuite(main);
