// Live state and local time in a real browser: Debian's Chromium (playwright-core) set to New
// York time, against a live `hookd serve` delivering to a live `hookd sink`.
//
// By clicking only, after the first page: times read "… ago" (and keep counting) with the
// local time and UTC on hover; the charts switch between 1 h, 24 h and 7 d (the address keeps
// the choice through a reload) and show a bucket's values on hover and with the keyboard; the
// message log's "Today" is New York's today and its range reads in New York time, as does
// recover's "Since"; when the receiver fails, the endpoint page's badge, "Failing since" and
// counts change without a reload, and a resent message's page turns delivered by itself; the
// portal in a frame on another site over plain http says to open it in its own tab, and the
// tab it opens works.
//
// Needs: target/debug/hookd (or HOOKD_BIN), Chromium at /usr/bin/chromium (or CHROMIUM).

import { createServer as createHttpServer } from 'node:http';
import assert from 'node:assert/strict';
import {
  api, assertAccessible, freePort, go, launchBrowser, runSuite, signUp, startServer, startSink, step,
  waitFor, watchErrors,
} from './support.mjs';

const ZONE = 'America/New_York';

/** `at` in New York as `YYYY-MM-DDTHH:MM` (a datetime-local value), and its offset in minutes. */
function newYork(at) {
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-CA', {
    timeZone: ZONE, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(at).map((p) => [p.type, p.value]));
  const text = `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
  const offset = Math.round((Date.parse(`${text}:00Z`) - Math.floor(at / 60_000) * 60_000) / 60_000);
  return { text, offset };
}

/** "your time, UTC−05:00" for an offset in minutes. */
function zoneWords(offset) {
  const m = Math.abs(offset);
  return `your time, UTC${offset < 0 ? '−' : '+'}${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
}

async function main() {
  const sink = await startSink();
  const sinkBase = sink.base;
  const { behave } = sink;
  const base = await startServer({}, 'hookd-live');
  const embedPort = await freePort();

  const browser = await launchBrowser();
  const context = await browser.newContext({
    baseURL: base, viewport: { width: 1440, height: 900 }, timezoneId: ZONE, locale: 'en-US',
  });
  const page = await context.newPage();
  const errors = watchErrors(page);

  step('sign up; the API makes an application and an endpoint at the sink');
  const key = await signUp(page);
  const app = await api(base, key, 'POST', '/app', { name: 'Storefront' });
  assert.equal(app.status, 201, app.text);
  const appId = app.body.id;
  const endpointUrl = `${sinkBase}/hooks/live`;
  const ep = await api(base, key, 'POST', `/app/${appId}/endpoint`, {
    url: endpointUrl, retryPolicy: { delays: ['200ms', '200ms'], maxAttempts: 3 },
  });
  assert.equal(ep.status, 201, ep.text);
  const send = async (n) => {
    const r = await api(base, key, 'POST', `/app/${appId}/msg`, { eventType: 'order.paid', payload: { n } });
    assert.equal(r.status, 202, r.text);
    return r.body.id;
  };
  await send(1);

  step('the overview picks the endpoint up by itself; its page fills in as attempts come');
  const epLink = page.getByRole('link', { name: endpointUrl });
  await epLink.waitFor({ timeout: 15_000 });
  await go(page, epLink, 'the endpoint on the overview');
  await page.locator('#attempts tbody tr').first().waitFor({ timeout: 15_000 });
  await waitFor(async () => (await page.locator('#ep-badge').textContent()).trim() === 'Healthy',
    'the badge says Healthy without a reload', 15_000);

  step('times read "… ago", keep counting, and give New York time and UTC on hover');
  const time = page.locator('#attempts time').first();
  const first = (await time.textContent()).trim();
  assert.match(first, /^(just now|\d+ s ago|1 min ago)$/, first);
  const iso = await time.getAttribute('datetime');
  const title = await time.getAttribute('title');
  const utc = `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
  assert.ok(title.endsWith(`(your time) · ${utc}`), title);
  const local = newYork(Date.parse(iso)).text;
  const [, hh, mm] = title.match(/(\d{1,2}):(\d{2}):\d{2}/);
  assert.equal(`${Number(hh) % 12}:${mm}`, `${Number(local.slice(11, 13)) % 12}:${local.slice(14, 16)}`, title);
  assert.match(title, /\bE[SD]T\b/, title);
  await waitFor(async () => (await time.textContent()).trim() !== first, 'the time counts on', 15_000);

  step('charts: 7 d swaps the card and stays through a reload; a bucket shows its values');
  await page.getByRole('link', { name: '7 d' }).click();
  await page.locator('#charts h2', { hasText: 'Last 7 days' }).waitFor();
  assert.match(page.url(), /\?range=7d$/);
  await page.reload();
  await page.locator('#charts h2', { hasText: 'Last 7 days' }).waitFor();
  assert.equal(await page.getByRole('link', { name: '7 d' }).getAttribute('aria-current'), 'true');
  const chart = page.locator('#charts svg.chart').first();
  const hits = chart.locator('.hit');
  const count = await hits.count();
  assert.ok(count > 0 && count <= 169, `${count} buckets`);
  const busy = await hits.evaluateAll((all) => all.findIndex((h) => / [1-9]\d* delivered/.test(h.textContent)));
  assert.ok(busy >= 0, 'a bucket holds the delivered attempt');
  await hits.nth(busy).hover();
  const tip = page.locator('#charts .chart-tip').first();
  await tip.waitFor({ state: 'visible' });
  assert.match(await tip.textContent(), /UTC: 1 delivered, 0 to retry, 0 dead$/);
  step('and with the keyboard: focus the chart, move with the arrow keys');
  await chart.focus();
  await page.keyboard.press('End');
  const last = await tip.textContent();
  await page.keyboard.press('ArrowLeft');
  assert.notEqual(await tip.textContent(), last, 'ArrowLeft shows the bucket before');
  assert.ok(await tip.isVisible());
  await page.getByRole('link', { name: '1 h' }).click();
  await page.locator('#charts h2', { hasText: 'Last hour' }).waitFor();
  assert.match(page.url(), /\?range=1h$/);

  step("recover's Since is New York time, and is read as such");
  const now = newYork(Date.now());
  await page.getByText(`Since (${zoneWords(now.offset)})`).waitFor();
  const sinceInput = page.getByLabel(`Since (${zoneWords(now.offset)})`);
  const shown = await sinceInput.inputValue();
  const dayAgo = newYork(Date.now() - 24 * 3600_000).text;
  assert.ok(Math.abs(Date.parse(`${shown}Z`) - Date.parse(`${dayAgo}Z`)) <= 2 * 60_000, `${shown} vs ${dayAgo}`);
  const hourAgo = Date.now() - 3600_000;
  await sinceInput.fill(newYork(hourAgo).text);
  await go(page, page.getByRole('button', { name: 'Recover', exact: true }), 'Recover');
  const minute = new Date(Math.floor(hourAgo / 60_000) * 60_000).toISOString();
  // The preview names the start in UTC: the New York time was read as New York's.
  await page.locator('#bulk-question', { hasText: `since ${minute.slice(0, 10)} ${minute.slice(11, 16)}:00 UTC` }).waitFor();
  await go(page, page.locator('.crumbs a').last(), 'back to the endpoint');

  step('the message log: "Today" is New York\'s today, and the range reads in New York time');
  await go(page, page.getByRole('link', { name: 'Messages', exact: true }).last(), "the endpoint's Messages");
  await go(page, page.getByRole('link', { name: 'Today', exact: true }), 'Today');
  assert.equal(await page.getByLabel(`From (${zoneWords(now.offset)})`).inputValue(), `${newYork(Date.now()).text.slice(0, 10)}T00:00`);
  assert.match(page.url(), new RegExp(`tz=${now.offset}(&|$)`));
  await page.locator('#message-list tbody tr').first().waitFor();
  await assertAccessible(page, 'the message log');

  step('the receiver fails: badge, "Failing since" and counts change on the open page');
  await go(page, page.locator('.crumbs a.url'), 'the endpoint in the crumbs');
  await page.evaluate(() => { window.stayed = true; });
  const failedBefore = await page.locator('dd[data-state="failed"]').textContent();
  assert.equal(failedBefore.trim(), '0');
  assert.equal(await page.locator('#ep-facts').getByText('Failing since').count(), 0);
  await behave({ failRate: 1.0, failStatus: 503 });
  const dead = await send(2);
  await waitFor(async () => (await page.locator('#ep-badge').textContent()).trim() === 'Failing',
    'the badge turns Failing', 30_000);
  await page.locator('#ep-facts').getByText('Failing since').waitFor();
  await waitFor(async () => (await page.locator('dd[data-state="failed"]').textContent()).trim() === '1',
    'the failed count turns 1', 30_000);
  assert.match((await page.locator('#ep-facts time').first().textContent()).trim(), /ago|just now/);
  assert.ok(await page.evaluate(() => window.stayed === true), 'the page was not reloaded');
  await assertAccessible(page, 'the endpoint page');

  step("a resent message's page turns delivered by itself");
  // The receiver answers after 4 s: the page shows the resend under way first.
  await behave({ failRate: 0, latencyMs: 4000 });
  await go(page, page.locator('#attempts').getByRole('link', { name: dead }).first(), 'the dead message');
  await go(page, page.getByRole('button', { name: 'Resend' }), 'Resend');
  await page.getByText('Resend queued').waitFor();
  await page.evaluate(() => { window.stayed = true; });
  assert.notEqual((await page.locator('.delivery .badge').first().textContent()).trim(), 'succeeded');
  await waitFor(async () => (await page.locator('.delivery .badge').first().textContent()).trim() === 'succeeded',
    'the delivery turns succeeded', 30_000);
  assert.ok(await page.evaluate(() => window.stayed === true), 'the page was not reloaded');
  await behave({ latencyMs: 0 });

  step('375 px: the endpoint page does not scroll sideways');
  await go(page, page.locator('.delivery h2 a').first(), 'the endpoint of the delivery');
  await page.setViewportSize({ width: 375, height: 800 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scroll');
  assert.deepEqual(errors, [], 'no script errors, 5xx or missing assets');

  step('the portal in a frame on another site over plain http: open it in its own tab');
  const access = await api(base, key, 'POST', `/auth/app-portal-access/${appId}`, {});
  assert.equal(access.status, 200, access.text);
  const embedder = createHttpServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>Acme account</title><h1>Your account</h1>
      <iframe id="portal" src="${access.body.url}" style="width:1000px;height:700px;border:0"></iframe>`);
  });
  await new Promise((ok) => embedder.listen(embedPort, ok));
  try {
    const site = await (await browser.newContext()).newPage();
    // localhost and 127.0.0.1 are different sites: the frame is cross-site.
    await site.goto(`http://localhost:${embedPort}/`);
    const frame = site.frameLocator('#portal');
    await frame.getByText('Open it in its own tab').waitFor();
    assert.equal(await frame.getByText('not valid').count(), 0);
    const [tab] = await Promise.all([
      site.waitForEvent('popup'),
      frame.getByRole('link', { name: 'Open in a new tab' }).click(),
    ]);
    await tab.getByRole('heading', { name: 'Storefront' }).waitFor();
    assert.match(tab.url(), new RegExp(`/portal/app/${appId}$`));
  } finally {
    embedder.close();
  }
}

await runSuite(main);
