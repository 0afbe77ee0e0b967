// The dashboard in a real browser: Debian's Chromium driven by playwright-core, against a
// live `hookd serve` (SQLite in a temporary directory) delivering to a live `hookd sink`.
//
// sign up → create an application, an event type in the catalog and an endpoint at the sink
// with the picker → send a test event and read its attempt (request and response headers) →
// send events through the API → see them delivered → switch the sink to failing → see
// failures, the endpoint's badge change and a dead attempt's "Gave up after N attempts" →
// resend one → recover since a date (a preview counts them, then progress) → replay from a
// message → the sink's report shows every message delivered → the portal: the tenant asks the
// API for a link, the customer opens it in a browser of their own, adds an endpoint at the sink
// with the picker, sees deliveries, failures and an attempt, resends one and recovers the
// rest; an expired link shows a clear page. Every main page of both, in both themes at 1440
// and 375 px: axe-core finds no serious or critical problem, nothing scrolls sideways, and a
// screenshot goes to web/screenshots/.
//
// Each journey opens one address and then moves as a person does: it clicks links and buttons
// (`go`) and reloads to see what the dispatcher did in the background (`reloadUntil`), never
// typing an address between steps. After every navigation `<main>` must show something: htmx
// attributes are inherited, and a container's `hx-select` once made a boosted link inside it
// swap in an empty page.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { createServer as createHttpServer } from 'node:http';
import assert from 'node:assert/strict';
import {
  assertAccessible, createApp, axeProblems, freePort, go, launchBrowser, mainShows, openMessage, reloadUntil,
  runSuite, shot, startServer, startSink, step, waitFor, watchErrors,
} from './support.mjs';

async function main() {
  const sink = await startSink();
  const sinkBase = sink.base;
  const base = await startServer();

  const browser = await launchBrowser();
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: 'UTC' });
  const page = await context.newPage();
  const consoleErrors = watchErrors(page);

  // --- Sign up -----------------------------------------------------------------------------
  step('sign-up and log-in pages: axe-core finds nothing serious in either theme');
  await page.goto('/signup');
  for (const theme of ['dark', 'light']) {
    await page.emulateMedia({ colorScheme: theme });
    await assertAccessible(page, `sign-up (${theme})`);
    await go(page, page.getByRole('link', { name: 'Log in' }).last(), 'Log in');
    await assertAccessible(page, `log-in (${theme})`);
    await shot(page, `login-${theme}-1440`);
    await go(page, page.getByRole('navigation').getByRole('link', { name: 'Sign up' }), 'Sign up');
  }
  step('sign up');
  await shot(page, 'signup');
  await page.getByLabel('Organisation').fill('Acme Shop');
  await page.getByLabel('Email').fill('ops@acme.example');
  await page.getByLabel('Password').fill('correct horse battery');
  await go(page, page.getByRole('button', { name: 'Sign up' }), 'Sign up');
  await page.getByText('Welcome to hookd, Acme Shop').waitFor();
  const key = (await page.locator('#api-key').textContent()).trim();
  assert.match(key, /^\S{20,}$/, 'the API key is shown once');
  await go(page, page.getByRole('link', { name: 'Continue to the overview' }), 'Continue to the overview');
  await page.getByText('No applications yet').waitFor();

  // --- Application and endpoint ------------------------------------------------------------
  step('create an application, an event type from the catalog, and an endpoint at the sink with the picker');
  await createApp(page, 'Storefront');
  // Endpoints filter only on event types that exist: the catalog creates one.
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Event types' }), 'Event types');
  await go(page, page.getByRole('link', { name: 'New event type' }), 'New event type');
  await page.getByLabel('Name').fill('order.paid');
  await page.getByLabel('Description').fill('An order was paid');
  await page.getByLabel('Example payload').fill('{"order": 0, "total": 0}');
  await go(page, page.getByRole('button', { name: 'Create event type' }), 'Create event type');
  await go(page, page.getByRole('navigation').getByRole('link', { name: 'Overview' }), 'Overview');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  await page.getByLabel('URL').fill(`${sinkBase}/hooks/orders`);
  await page.getByRole('checkbox', { name: 'order.paid' }).check();
  // Two quick tries, so failures become dead letters within a second.
  await page.locator('textarea[name=retry_policy]').fill('{"delays": ["300ms"], "maxAttempts": 2}');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  const [, appId, epId] = new URL(page.url()).pathname.match(/^\/app\/([^/]+)\/endpoint\/([^/?]+)/);
  assert.equal(await badge(page), 'No deliveries yet');
  const endpointUrl = `${sinkBase}/hooks/orders`;

  step('send a test event from the endpoint page: the log shows it delivered, its attempt shows both sides');
  await go(page, page.getByRole('button', { name: 'Send test event' }), 'Send test event');
  await go(page, page.getByRole('link', { name: 'Messages', exact: true }).last(), "the endpoint's Messages");
  await reloadUntil(page, 'the test event delivered',
    async (p) => (await p.locator('#message-list .statuses .badge', { hasText: 'Delivered' }).count()) === 1);
  await go(page, page.locator('#message-list tbody a[href*="/msg/msg_"]').first(), 'the test event');
  await reloadUntil(page, 'the test event delivered', deliveryIs('succeeded'));
  await go(page, page.locator('.delivery tbody a[href*="/attempt/"]').first(), 'its attempt');
  for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    await page.locator('#request').getByText(header, { exact: true }).first().waitFor();
  }
  await page.locator('#response').getByText('Status 200').waitFor();
  assert.ok(await page.locator('#response table.headers tbody tr').count() > 0, 'the response headers are shown');
  await go(page, page.locator('.crumbs a[href*="/msg/msg_"]'), 'the message in the crumbs');
  await go(page, page.locator('.delivery h2 a').first(), 'the endpoint of its delivery');

  const send = async (n) => {
    const r = await fetch(`${base}/api/v1/app/${appId}/msg`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ eventType: 'order.paid', eventId: `order-${n}`, payload: { order: n, total: n * 10 } }),
    });
    const body = await r.text();
    assert.equal(r.status, 202, body);
    return JSON.parse(body).id;
  };
  // From a message's page, its delivery's endpoint link leads to the endpoint.
  const toEndpoint = async () => go(page, page.locator('.delivery h2 a').first(), 'the endpoint of a delivery');
  const toMessages = async () => go(page, page.getByRole('link', { name: 'Messages', exact: true }).first(), 'Messages');

  // --- Delivered ---------------------------------------------------------------------------
  step('send 5 events through the API and see them delivered');
  const first = [];
  for (let n = 1; n <= 5; n++) first.push(await send(n));
  await toMessages();
  await reloadUntil(page, 'six messages listed (the test event and five), each delivered',
    async (p) => (await p.locator('#message-list tbody tr').count()) === 6
      && (await p.locator('#message-list .statuses .badge', { hasText: 'Delivered' }).count()) === 6);
  step('a quick range: the last hour');
  await go(page, page.getByRole('link', { name: 'Last hour' }), 'Last hour');
  assert.equal(await page.locator('#message-list tbody tr').count(), 6);
  assert.ok((await page.getByLabel('From (UTC)').inputValue()).length > 0, 'the range shows as exact times');
  step('click a message in the list: its page shows');
  await openMessage(page, first[0]);
  await reloadUntil(page, 'first message delivered', deliveryIs('succeeded'));
  await page.getByText('"total": 10').waitFor();
  await waitFor(async () => (await sink.report()).unique === 6, 'the sink acknowledged 6');

  // --- Failing -----------------------------------------------------------------------------
  step('switch the sink to failing: failures show and the badge changes');
  await sink.behave({ failRate: 1.0, failStatus: 503 });
  const failed = [];
  for (let n = 6; n <= 8; n++) failed.push(await send(n));
  await toMessages();
  await openMessage(page, failed[0]);
  // Six failing attempts (3 messages × 2): the default breaker opens at the fifth failure in
  // a row and holds the sixth for its 30 s open period. Which message's retry comes sixth
  // depends on timing, so this wait outlasts one open period.
  await reloadUntil(page, 'a dead letter', deliveryIs('failed'), 45_000);
  assert.equal(await page.locator('.delivery tbody tr').count(), 2, 'two attempts listed');
  await page.getByText('503').first().waitFor();
  step('open the dead delivery\'s last attempt: what was sent and answered, and why it stopped');
  await go(page, page.locator('.delivery tbody a[href*="/attempt/"]').first(), 'the last attempt');
  await page.locator('#request').getByText('webhook-signature').waitFor();
  await page.locator('#response').getByText('Status 503').waitFor();
  await page.locator('#explained').getByText(/Gave up after \d+ attempts/).waitFor();
  await go(page, page.locator('.crumbs').getByRole('link', { name: failed[0] }), 'the message in the crumbs');
  await toEndpoint();
  await reloadUntil(page, 'the endpoint badge leaves healthy',
    async (p) => ['Failing', 'Breaker open'].includes(await badge(p)));
  const failingBadge = await badge(page);
  await go(page, page.getByRole('link', { name: 'Dead letters' }), 'Dead letters');
  await reloadUntil(page, 'dead letters page lists them',
    async (p) => (await p.locator('tbody tr').count()) === 3);
  await go(page, page.locator('.crumbs a.url'), 'the endpoint in the crumbs');
  await toMessages();
  await page.getByLabel('Status').selectOption('failed');
  await go(page, page.getByRole('button', { name: 'Filter' }), 'Filter');
  await reloadUntil(page, 'three dead messages listed',
    async (p) => (await p.locator('#message-list tbody tr').count()) === 3);
  // Each reads dead in the log, not like a delivered message.
  assert.equal(await page.locator('#message-list .statuses .badge', { hasText: 'Dead' }).count(), 3);
  assert.equal(await page.locator('#message-list .statuses .badge', { hasText: 'Delivered' }).count(), 0);

  // --- Resend one --------------------------------------------------------------------------
  step('resend one failed message once the sink is back');
  await sink.behave({ failRate: 0 });
  await openMessage(page, failed[0]);
  await go(page, page.getByRole('button', { name: 'Resend' }), 'Resend');
  await page.getByText('Resend queued').waitFor();
  await reloadUntil(page, 'the resent message delivered', deliveryIs('succeeded'));
  await page.getByText('manual').first().waitFor();
  await waitFor(async () => (await sink.report()).unique === 7, 'the sink acknowledged the resend');

  // --- Recover since a date ----------------------------------------------------------------
  step('recover failed messages since a date: a preview counts them, then progress to the end');
  await toEndpoint();
  const since = new Date(Date.now() - 3600_000).toISOString().slice(0, 16);
  await page.getByLabel('Since (UTC)').fill(since);
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover');
  await page.locator('#bulk-question', { hasText: /^Recover 2 failed messages since .+\?$/ }).waitFor();
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover (confirm)');
  await page.locator('#job-status', { hasText: 'Finished: 2 failed messages queued again.' }).waitFor({ timeout: 30_000 });
  await waitFor(async () => (await sink.report()).unique === 9, 'the two other dead letters recovered');
  await go(page, page.getByRole('link', { name: 'Back to the endpoint' }), 'Back to the endpoint');
  await reloadUntil(page, 'the badge is healthy again', async (p) => (await badge(p)) === 'Healthy');

  // --- Replay from a message ---------------------------------------------------------------
  step('replay everything failed since a message');
  await sink.behave({ failRate: 1.0, failStatus: 500 });
  const later = [];
  for (let n = 9; n <= 10; n++) later.push(await send(n));
  await go(page, page.getByRole('link', { name: 'Messages', exact: true }).last(), "the endpoint's Messages");
  await page.getByRole('heading', { name: 'Messages to this endpoint' }).waitFor();
  await openMessage(page, later[1]);
  await reloadUntil(page, 'the later messages dead', deliveryIs('failed'));
  await toMessages();
  await openMessage(page, later[0]);
  await reloadUntil(page, 'the earlier of them dead too', deliveryIs('failed'));
  await sink.behave({ failRate: 0 });
  await go(page, page.getByRole('button', { name: 'Replay all failed since this message' }), 'Replay');
  await page.locator('#bulk-question', { hasText: /2 failed messages/ }).waitFor();
  await go(page, page.locator('#bulk-question ~ form button[type=submit]'), 'Replay (confirm)');
  await page.locator('#job-status', { hasText: 'Finished: 2 failed messages queued again.' }).waitFor({ timeout: 30_000 });
  await waitFor(async () => (await sink.report()).unique === 11, 'both replayed');
  await go(page, page.getByRole('link', { name: 'Back to the endpoint' }), 'Back to the endpoint');
  await go(page, page.getByRole('link', { name: 'Messages', exact: true }).last(), "the endpoint's Messages");
  await openMessage(page, later[1]);
  await reloadUntil(page, 'the replayed message delivered', deliveryIs('succeeded'));

  // --- The sink's report -------------------------------------------------------------------
  step("the sink's report shows every message delivered");
  const report = await sink.report();
  assert.equal(report.unique, 11, JSON.stringify(report));
  assert.equal(report.duplicates, 0, JSON.stringify(report));
  assert.ok((report.statuses['503'] || 0) >= 6, `failures were seen: ${JSON.stringify(report)}`);

  // --- Charts ------------------------------------------------------------------------------
  step('the overview charts count what happened');
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await page.getByText('Last 24 hours').waitFor();
  const summary = await page.locator('.chart-box figcaption').first().textContent();
  const delivered = Number(summary.match(/([\d,]+) delivered/)[1].replace(/,/g, ''));
  assert.equal(delivered, 11, summary);
  assert.equal(await page.locator('svg.chart').count(), 4);

  step("the endpoint page's delivery counts are the stats API's");
  const statsResp = await fetch(`${base}/api/v1/app/${appId}/endpoint/${epId}/stats`, {
    headers: { authorization: `Bearer ${key}` },
  });
  const stats = await statsResp.json();
  assert.equal(statsResp.status, 200, JSON.stringify(stats));
  assert.equal(stats.success, 11, JSON.stringify(stats));
  await go(page, page.getByRole('link', { name: endpointUrl }), 'the endpoint on the overview');
  for (const [label, field] of [['succeeded', 'success'], ['pending', 'pending'], ['sending', 'sending'], ['failed', 'fail']]) {
    const shown = Number((await page.locator(`dd[data-state="${label}"]`).textContent()).replace(/,/g, ''));
    assert.equal(shown, stats[field], `${label}: the page shows ${shown}, the API ${JSON.stringify(stats)}`);
  }

  // --- The portal: the tenant's customer, through a link -----------------------------------
  const portal = await portalFlow({ browser, base, key, sink, sinkBase, consoleErrors, tenantPage: page });

  // --- Every main page at both widths ------------------------------------------------------
  step('every main page in both themes at 1440 and 375 px: axe-core finds nothing serious, nothing scrolls sideways, screenshots');
  // Each width and theme is a tour from one address onwards, by clicks.
  const tour = [
    ['overview', null],
    ['endpoint', (p) => go(p, p.getByRole('link', { name: endpointUrl }), 'the endpoint')],
    ['messages', (p) => go(p, p.getByRole('link', { name: 'Messages', exact: true }).first(), 'Messages')],
    ['message', (p) => go(p, p.getByRole('link', { name: failed[0], exact: true }), 'a message')],
    ['attempt', (p) => go(p, p.locator('.delivery tbody a[href*="/attempt/"]').first(), 'an attempt')],
    ['message-again', (p) => go(p, p.locator('.crumbs').getByRole('link', { name: failed[0] }), 'the message in the crumbs')],
    ['endpoint-again', (p) => go(p, p.locator('.delivery h2 a').first(), 'its endpoint')],
    ['dead-letters', (p) => go(p, p.getByRole('link', { name: 'Dead letters' }), 'Dead letters')],
    ['endpoint-back', (p) => go(p, p.locator('.crumbs a.url'), 'the endpoint in the crumbs')],
    ['endpoint-edit', (p) => go(p, p.getByRole('link', { name: 'Edit', exact: true }), 'Edit')],
    ['settings', (p) => go(p, p.getByRole('link', { name: 'Settings' }), 'Settings')],
    ['event-types', (p) => go(p, p.getByRole('navigation').getByRole('link', { name: 'Event types' }), 'Event types')],
    ['event-type', (p) => go(p, p.getByRole('link', { name: 'order.paid', exact: true }), 'an event type')],
    ['sources', (p) => go(p, p.getByRole('navigation').getByRole('link', { name: 'Sources' }), 'Sources')],
    ['source-new', (p) => go(p, p.getByRole('link', { name: 'New source' }), 'New source')],
    ['overview-again', (p) => go(p, p.getByRole('navigation').getByRole('link', { name: 'Overview' }), 'Overview')],
    ['application', (p) => go(p, p.getByRole('link', { name: 'Storefront', exact: true }), 'the application')],
    ['overview-back', (p) => go(p, p.getByRole('navigation').getByRole('link', { name: 'Overview' }), 'Overview')],
    ['endpoint-new', (p) => go(p, p.getByRole('link', { name: 'Add an endpoint' }).first(), 'Add an endpoint')],
  ];
  const problems = [];
  for (const theme of ['light', 'dark']) {
    // The dashboard follows the system's theme; the portal, the tenant's choice in Settings.
    await page.emulateMedia({ colorScheme: theme });
    await page.setViewportSize({ width: 1440, height: 900 });
    await go(page, page.getByRole('link', { name: 'Settings' }), 'Settings');
    const dark = page.getByRole('checkbox', { name: 'Dark theme' });
    if ((await dark.isChecked()) !== (theme === 'dark')) {
      await dark.setChecked(theme === 'dark');
      await go(page, page.locator('form[action="/settings/portal"]').getByRole('button', { name: 'Save' }), 'Save the portal settings');
    }
    for (const [width, height] of [[1440, 900], [375, 780]]) {
      for (const [p, start, steps] of [[page, '/', tour], [portal.page, portal.home, portal.tour]]) {
        await p.setViewportSize({ width, height });
        await p.goto(start);
        for (const [name, move] of steps) {
          if (move) await move(p);
          await mainShows(p, name);
          if (name.endsWith('-again') || name.endsWith('-back')) continue;
          const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(overflow <= 1, `${name} scrolls sideways by ${overflow}px at ${width}px (${theme})`);
          for (const found of await axeProblems(p)) problems.push(`${name} ${theme} ${width}px: ${found}`);
          await shot(p, `${name}-${theme}-${width}`);
        }
      }
    }
  }
  assert.deepEqual(problems, [], 'axe-core: serious or critical violations');
  assert.deepEqual(consoleErrors, [], 'no script errors in the browser console');
  // After the console check: the browser logs the page's 401 as a failed load.
  step('an expired portal link shows a clear page');
  const expired = await fetch(`${base}/api/v1/auth/app/${portal.appId}/expire-all`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(expired.status, 204);
  await portal.page.goto(`/portal/app/${portal.appId}`);
  await portal.page.getByText('This link is not valid').waitFor();
  await shot(portal.page, 'portal-expired-1440');
  console.log(`ok: dashboard flow passed (badge went healthy → ${failingBadge} → healthy; sink ${JSON.stringify(report.statuses)})`);
}

/**
 * The portal as a tenant's customer uses it: the tenant asks the API for a link (creating the
 * customer's application with it); the customer opens it in a browser of their own, adds an
 * endpoint at the sink, sees the tenant's messages delivered, sees failures while the sink
 * fails, resends one and recovers the rest. Returns the customer's page and its pages to
 * screenshot.
 */
async function portalFlow({ browser, base, key, sink, sinkBase, consoleErrors, tenantPage }) {
  step('portal: the tenant asks for a link; the customer opens it');
  const uid = `customer-${Date.now()}`;
  const access = await fetch(`${base}/api/v1/auth/app-portal-access/${uid}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ application: { name: 'Customer Co', uid } }),
  });
  const { url } = await access.json();
  assert.equal(access.status, 200, url);
  assert.match(url, /\/portal\/#token=hkp_/);
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: 'UTC' });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`portal: ${m.text()}`); });
  page.on('pageerror', (e) => consoleErrors.push(`portal: ${e}`));
  await page.goto(url);
  await page.getByRole('heading', { name: 'Customer Co' }).waitFor();
  assert.ok(!page.url().includes('token'), `the token left the address bar: ${page.url()}`);
  const appId = new URL(page.url()).pathname.match(/^\/portal\/app\/([^/]+)$/)[1];
  await page.getByText('No endpoints yet').waitFor();
  await page.getByText('order.paid').first().waitFor();
  assert.equal(await page.getByRole('link', { name: 'Settings' }).count(), 0, 'no dashboard links');

  step('portal: the customer adds an endpoint at the sink');
  await go(page, page.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint');
  await page.getByLabel('URL').fill(`${sinkBase}/hooks/customer`);
  await page.getByRole('checkbox', { name: 'order.paid' }).check();
  await page.locator('summary', { hasText: 'Advanced' }).click();
  await page.locator('textarea[name=retry_policy]').fill('{"delays": ["300ms"], "maxAttempts": 2}');
  await go(page, page.getByRole('button', { name: 'Create endpoint' }), 'Create endpoint');
  await page.getByText('Endpoint created').waitFor();
  await page.getByText('How to verify a request').waitFor();

  const send = async (n) => {
    const r = await fetch(`${base}/api/v1/app/${appId}/msg`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ eventType: 'order.paid', payload: { customerOrder: n } }),
    });
    const body = await r.text();
    assert.equal(r.status, 202, body);
    return JSON.parse(body).id;
  };
  const before = (await sink.report()).unique;
  const toMessages = async () => go(page, page.getByRole('link', { name: 'Messages', exact: true }).first(), 'Messages');

  step('portal: the tenant sends; the customer sees them delivered');
  const sent = [await send(1), await send(2)];
  await toMessages();
  await reloadUntil(page, 'two messages listed',
    async (p) => (await p.locator('#message-list tbody tr').count()) === 2);
  await openMessage(page, sent[0]);
  await reloadUntil(page, 'the customer sees a delivery', deliveryIs('succeeded'));

  step('portal: failures while the sink fails; resend one, recover the rest');
  await sink.behave({ failRate: 1.0, failStatus: 503 });
  const failed = [await send(3), await send(4)];
  await toMessages();
  await openMessage(page, failed[1]);
  await reloadUntil(page, 'a failed message', deliveryIs('failed'), 45_000);
  await toMessages();
  await openMessage(page, failed[0]);
  await reloadUntil(page, 'the other failed too', deliveryIs('failed'), 45_000);
  await sink.behave({ failRate: 0 });
  await go(page, page.getByRole('button', { name: 'Resend' }), 'Resend');
  await page.getByText('Resend queued').waitFor();
  await reloadUntil(page, 'the resent message delivered', deliveryIs('succeeded'));
  await go(page, page.locator('.delivery h2 a').first(), 'the endpoint of a delivery');
  await page.getByLabel('Since (UTC)').fill(new Date(Date.now() - 3600_000).toISOString().slice(0, 16));
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover');
  await page.locator('#bulk-question', { hasText: /^Recover 1 failed message since .+\?$/ }).waitFor();
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover (confirm)');
  await page.locator('#job-status', { hasText: 'Finished: 1 failed message queued again.' }).waitFor({ timeout: 30_000 });
  await waitFor(async () => (await sink.report()).unique === before + 4, 'all four reached the sink');
  await go(page, page.getByRole('link', { name: 'Back to the endpoint' }), 'Back to the endpoint');
  await go(page, page.getByRole('link', { name: 'Messages', exact: true }).last(), "the endpoint's Messages");
  await page.getByRole('heading', { name: 'Messages to this endpoint' }).waitFor();
  await reloadUntil(page, 'the log shows all four delivered',
    async (p) => (await p.locator('#message-list .statuses .badge', { hasText: 'Delivered' }).count()) === 4);
  await go(page, page.getByRole('link', { name: 'Overview' }).first(), 'Overview');
  await reloadUntil(page, 'the endpoint healthy again', async (p) => (await portalBadge(p)) === 'Healthy');

  step('portal: in an iframe on a site the tenant allows, and refused on one it does not');
  const [allowedPort, otherPort] = [await freePort(), await freePort()];
  const embedder = createHttpServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>Acme account</title><h1>Your account</h1>
      <iframe id="portal" src="${url}" style="width:1000px;height:700px;border:0"></iframe>`);
  });
  const other = createHttpServer(embedder.listeners('request')[0]);
  await new Promise((ok) => embedder.listen(allowedPort, '127.0.0.1', ok));
  await new Promise((ok) => other.listen(otherPort, '127.0.0.1', ok));
  try {
    await go(tenantPage, tenantPage.getByRole('link', { name: 'Settings' }), 'Settings');
    await tenantPage.getByLabel('Display name').fill('Acme Webhooks');
    await tenantPage.getByLabel('Primary colour').fill('#aa3300');
    await tenantPage.getByLabel('Sites that may embed the portal').fill(`http://127.0.0.1:${allowedPort}`);
    await tenantPage.locator('#portal-settings').getByRole('button', { name: 'Save' }).click();
    await tenantPage.getByText('Portal settings saved').waitFor();
    const embedding = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const site = await embedding.newPage();
    await site.goto(`http://127.0.0.1:${allowedPort}/`);
    const framed = site.frameLocator('#portal');
    await framed.getByRole('heading', { name: 'Customer Co' }).waitFor();
    // The name is the header's own text.
    await framed.locator('header .brand', { hasText: 'Acme Webhooks' }).waitFor();
    await shot(site, 'portal-embedded-1440');
    const refused = [];
    const stranger = await (await browser.newContext()).newPage();
    stranger.on('console', (m) => refused.push(m.text()));
    await stranger.goto(`http://127.0.0.1:${otherPort}/`);
    await waitFor(async () => refused.some((t) => t.includes('frame-ancestors')),
      'Chromium refuses to frame the portal for a site the tenant did not list');
    assert.equal(await stranger.frameLocator('#portal').getByRole('heading', { name: 'Customer Co' }).count(), 0);
    await embedding.close();
  } finally {
    embedder.close();
    other.close();
  }

  const endpointUrl = `${sinkBase}/hooks/customer`;
  return {
    page,
    appId,
    home: `/portal/app/${appId}`,
    tour: [
      ['portal-home', null],
      ['portal-endpoint', (p) => go(p, p.getByRole('link', { name: endpointUrl }), 'the endpoint')],
      ['portal-messages', (p) => go(p, p.getByRole('link', { name: 'Messages', exact: true }).first(), 'Messages')],
      ['portal-message', (p) => go(p, p.getByRole('link', { name: failed[0], exact: true }), 'a message')],
      ['portal-attempt', (p) => go(p, p.locator('.delivery tbody a[href*="/attempt/"]').first(), 'an attempt')],
      ['portal-message-again', (p) => go(p, p.locator('.crumbs').getByRole('link', { name: failed[0] }), 'the message in the crumbs')],
      ['portal-home-again', (p) => go(p, p.getByRole('link', { name: 'Overview' }).first(), 'Overview')],
      ['portal-endpoint-new', (p) => go(p, p.getByRole('link', { name: 'Add an endpoint' }), 'Add an endpoint')],
    ],
  };
}

/** The first endpoint badge on an application's portal home. */
async function portalBadge(page) {
  return (await page.locator('.endpoints .badge').first().textContent()).trim();
}

/** A check for `until`: the message page's first delivery is in `state`. */
function deliveryIs(state) {
  return async (p) => (await p.locator('.delivery .badge').first().textContent()).trim() === state;
}

async function badge(page) {
  return (await page.locator('.heading .badge').first().textContent()).trim();
}

await runSuite(main);
