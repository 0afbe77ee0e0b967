// Managing an application in the dashboard, by clicking only (after the first page): sign up →
// create an application → rename it → add an endpoint at a live `hookd sink` → make its
// messages fail → Recover: the preview says how many → confirm → the job's progress, polled,
// reaches "Finished" → a second endpoint: Replay missing, with its preview → a portal link
// created, listed, copied and revoked (the customer's page then says the link is not valid)
// → the application deleted after typing its name. Screenshots at 1440 and 375 px, light and
// dark; axe-core on every page it adds.
import assert from 'node:assert/strict';
import {
  api, assertAccessible, createApp, go, looks, launchBrowser, mainShows, reloadUntil, runSuite, shot, signUp,
  startServer, startSink, step, waitFor, watchErrors,
} from './support.mjs';

async function main() {
  const sink = await startSink();
  const sinkBase = sink.base;
  const base = await startServer({}, 'hookd-manage');


  const browser = await launchBrowser();
  const context = await browser.newContext({
    baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: 'UTC',
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await context.newPage();
  // "Revoke", "Expire all" and the like ask first (hx-confirm): say yes.
  page.on('dialog', (d) => d.accept());
  const errors = watchErrors(page);

  step('sign up and create an application');
  const key = await signUp(page);
  await createApp(page, 'Storefront');

  step("rename it on its page; a blank name is refused under the field");
  await go(page, page.getByRole('link', { name: 'Storefront', exact: true }), "the application's name");
  await page.getByRole('heading', { name: 'Delete this application' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill(' ');
  // The browser's own check would stop a blank field; the server's message is what is tested.
  await page.evaluate(() => document.querySelector('#app-name').removeAttribute('required'));
  await go(page, page.getByRole('button', { name: 'Rename' }), 'Rename (blank)');
  await page.locator('#app-name-error', { hasText: 'Give the application a name' }).waitFor();
  assert.equal(await page.locator('#app-name').getAttribute('aria-invalid'), 'true');
  await page.getByLabel('Name', { exact: true }).fill('Storefront EU');
  await go(page, page.getByRole('button', { name: 'Rename' }), 'Rename');
  await page.getByText('Application renamed.').waitFor();
  await page.getByRole('heading', { name: 'Storefront EU' }).first().waitFor();
  await looks(page, 'manage-application');

  step('add an endpoint at the sink, with quick retries');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  await page.getByLabel('URL').fill(`${sinkBase}/hooks/orders`);
  await page.locator('textarea[name=retry_policy]').fill('{"delays": ["200ms"], "maxAttempts": 2}');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  const [, appId, epId] = new URL(page.url()).pathname.match(/^\/app\/([^/]+)\/endpoint\/([^/?]+)/);

  step('the sink fails: three messages become dead letters');
  await sink.behave({ failRate: 1.0, failStatus: 503 });
  for (let n = 1; n <= 3; n++) {
    const r = await api(base, key, 'POST', `/app/${appId}/msg`, { eventType: 'order.paid', payload: { n } });
    assert.equal(r.status, 202, r.text);
  }
  // Six failing attempts: the breaker opens at the fifth failure in a row and holds the sixth
  // for its 30 s open period, so this wait outlasts one.
  await waitFor(async () => (await api(base, key, 'GET', `/app/${appId}/endpoint/${epId}/stats`)).body.fail === 3,
    'three failed deliveries', 45_000);
  await sink.behave({ failRate: 0 });

  step('Recover: the preview counts them; Cancel goes back and starts nothing');
  const hourAgo = new Date(Date.now() - 3600_000).toISOString().slice(0, 16);
  await page.getByLabel('Since (UTC)').fill(hourAgo);
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover');
  await page.getByText(/^Recover 3 failed messages since .+\?$/).waitFor();
  await looks(page, 'manage-recover-preview');
  await go(page, page.getByRole('link', { name: 'Cancel', exact: true }), 'Cancel on the preview');
  assert.equal((await api(base, key, 'GET', '/background-task')).body.data.length, 0, 'a preview starts nothing');

  step('Recover, confirmed: the progress page polls until it is finished');
  await page.getByLabel('Since (UTC)').fill(hourAgo);
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover');
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover (confirm)');
  await page.getByRole('heading', { name: /Recovering failed messages since/ }).waitFor();
  // No reload: htmx's polling brings the end.
  await page.locator('#job-status', { hasText: 'Finished: 3 failed messages queued again.' }).waitFor({ timeout: 30_000 });
  assert.equal(await page.getByRole('button', { name: 'Cancel the job' }).count(), 0, 'nothing left to cancel');
  await looks(page, 'manage-job-finished');
  await waitFor(async () => (await sink.report()).unique === 3, 'the sink got all three');

  step('a second endpoint: Replay missing, with its preview');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  await page.getByLabel('URL').fill(`${sinkBase}/hooks/late`);
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  const receivedBefore = (await sink.report()).received;
  await page.getByLabel('Starting at (UTC)').fill(hourAgo);
  await go(page, page.getByRole('button', { name: 'Replay missing' }), 'Replay missing');
  await page.getByText(/^Replay 3 missing messages since .+\?$/).waitFor();
  await go(page, page.getByRole('button', { name: 'Replay', exact: true }), 'Replay (confirm)');
  await page.locator('#job-status', { hasText: 'Finished: 3 missing messages queued.' }).waitFor({ timeout: 30_000 });
  // The same messages (same webhook-id) to another endpoint: counted as received, not unique.
  await waitFor(async () => (await sink.report()).received >= receivedBefore + 3, 'the late endpoint got all three');

  step('a portal link: created, copied, listed, then revoked');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: 'Storefront EU', exact: true }), "the application's name");
  await page.getByText('No portal links yet.').waitFor();
  await go(page, page.getByRole('button', { name: 'Create portal link' }), 'Create portal link');
  const link = (await page.locator('#portal-link').textContent()).trim();
  assert.match(link, /\/portal\/#token=hkp_/);
  await page.getByRole('button', { name: 'Copy', exact: true }).click();
  await page.getByRole('button', { name: 'Copied' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link);
  assert.equal(await page.locator('#portal-links tbody tr').count(), 1);
  await page.locator('#portal-links .badge', { hasText: 'Active' }).waitFor();
  await page.getByText('cannot be shown or copied again').waitFor();

  const customerContext = await browser.newContext({ viewport: { width: 375, height: 800 } });
  const customer = await customerContext.newPage();
  const customerErrors = watchErrors(customer);
  await customer.goto(link);
  await customer.getByText(`${sinkBase}/hooks/orders`).first().waitFor();
  await mainShows(customer, 'opening the portal link');

  await go(page, page.getByRole('button', { name: 'Revoke' }), 'Revoke');
  await page.getByText('Portal link revoked').waitFor();
  await page.locator('#portal-links .badge', { hasText: 'Revoked' }).waitFor();
  await reloadUntil(customer, 'the customer told the link is not valid',
    async (p) => (await p.getByText('This link is not valid').count()) > 0);
  await customer.getByText('was revoked').waitFor();

  step('delete the application: its name must be typed');
  await page.getByLabel("Type the application's name to confirm").fill('Storefront');
  await go(page, page.getByRole('button', { name: 'Delete application' }), 'Delete (wrong name)');
  await page.locator('#confirm-name-error', { hasText: 'exactly' }).waitFor();
  await page.getByLabel("Type the application's name to confirm").fill('Storefront EU');
  await go(page, page.getByRole('button', { name: 'Delete application' }), 'Delete application');
  await page.getByText('Application Storefront EU deleted').waitFor();
  await page.getByText('No applications yet').waitFor();
  assert.equal((await api(base, key, 'GET', `/app/${appId}`)).status, 404);

  // 4xx pages of the checks above are expected; nothing else may fail.
  const unexpected = [...errors, ...customerErrors].filter((e) => !/^4\d\d /.test(e) && !e.includes('status of 4'));
  assert.deepEqual(unexpected, [], 'no script errors or 5xx answers');
  console.log('ok: rename, recover and replay with previews and progress, portal links, delete');
}

await runSuite(main);
