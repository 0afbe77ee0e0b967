// An endpoint's message log in an application past one page's walk window (decisions 107), by
// clicking only (after the first page): sign up → create an application → (through the API, as
// the tenant's code would: two endpoints, one taking only `order.refunded`; one refund, then
// 5,000 other messages) → Overview → the refunds endpoint → Messages: the newest 5,000
// hold no match, and the page says so and offers Older → Older: the refund → its message page
// → the application's messages filtered by the refund's event type (decisions 109): the same.
// Screenshots at 1440 and 375 px, light and dark; axe-core on the page it adds.
import assert from 'node:assert/strict';
import {
  api, createApp, go, looks, launchBrowser, runSuite, signUp, startServer, startSink, step,
  watchErrors,
} from './support.mjs';

/** One more than a page's walk window (store::WALK_WINDOW). */
const OTHERS = 5_000;

async function main() {
  const sink = await startSink();
  const base = await startServer(
    { HOOKD_TENANT_INGEST_RATE: '100000', HOOKD_TENANT_INGEST_BURST: '100000' },
    'hookd-walk',
  );
  const browser = await launchBrowser();
  const context = await browser.newContext({
    baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: 'UTC',
  });
  const page = await context.newPage();
  const errors = watchErrors(page);

  step('sign up and create an application');
  const key = await signUp(page);
  await createApp(page, 'Orders');
  const apps = await api(base, key, 'GET', '/app');
  const appId = apps.body.data.find((a) => a.name === 'Orders').id;

  step(`its code adds two endpoints, sends one refund and then ${OTHERS} other messages`);
  const type = await api(base, key, 'POST', '/event-type', { name: 'order.refunded', description: 'A refund' });
  assert.equal(type.status, 201, type.text);
  const refunds = await api(base, key, 'POST', `/app/${appId}/endpoint`, {
    url: `${sink.base}/hooks/refunds`, description: 'Refunds', filterTypes: ['order.refunded'],
  });
  assert.equal(refunds.status, 201, refunds.text);
  const all = await api(base, key, 'POST', `/app/${appId}/endpoint`, {
    url: `${sink.base}/hooks/all`, description: 'Everything',
  });
  assert.equal(all.status, 201, all.text);
  const refund = await api(base, key, 'POST', `/app/${appId}/msg`, {
    eventType: 'order.refunded', payload: { order: 1 },
  });
  assert.equal(refund.status, 202, refund.text);
  let next = 0;
  const sender = async () => {
    while (next < OTHERS) {
      const n = next++;
      const r = await api(base, key, 'POST', `/app/${appId}/msg`, { eventType: 'order.paid', payload: { n } });
      assert.equal(r.status, 202, r.text);
    }
  };
  await Promise.all(Array.from({ length: 16 }, sender));

  step('Overview → the refunds endpoint → Messages: none in the newest 5,000, and it says so');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await go(page, page.getByRole('link', { name: /\/hooks\/refunds$/ }).first(), 'the refunds endpoint');
  await go(page, page.locator('main a.button', { hasText: 'Messages' }), "the endpoint's Messages");
  await page.getByText('No match among the messages this page read; Older → reads further back.').waitFor();
  assert.equal(await page.getByText('order.refunded').count(), 0, 'the refund is older than the window');
  await looks(page, 'walk-window-empty');

  step('Older → the refund, and its message page');
  await go(page, page.getByRole('link', { name: 'Older →' }), 'Older →');
  const row = page.locator('tr', { hasText: 'order.refunded' });
  await row.waitFor();
  assert.equal(await page.getByText('order.paid').count(), 0, "only the endpoint's messages");
  await go(page, row.getByRole('link').first(), 'the refund');
  await page.getByText(refund.body.id).first().waitFor();

  step("the crumbs' Messages → filter by event type order.refunded: none in the newest 5,000");
  await go(page, page.locator('.crumbs a', { hasText: 'Messages' }), "the application's Messages");
  await page.getByLabel('Event type').fill('order.refunded');
  await go(page, page.getByRole('button', { name: 'Filter' }), 'Filter');
  await page.getByText('No match among the messages this page read; Older → reads further back.').waitFor();
  assert.equal(await page.locator('tr', { hasText: 'order.refunded' }).count(), 0, 'the refund is older than the window');
  await looks(page, 'walk-event-type-empty');

  step('Older → the refund alone');
  await go(page, page.getByRole('link', { name: 'Older →' }), 'Older →');
  await page.locator('tr', { hasText: 'order.refunded' }).waitFor();
  assert.equal(await page.locator('tr', { hasText: 'order.paid' }).count(), 0, 'only refunds');

  assert.deepEqual(errors, [], 'no console errors or failed requests');
  await browser.close();
  sink.stop?.();
}

runSuite(main);
