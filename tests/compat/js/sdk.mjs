// Svix's official JavaScript SDK against a live hookd, as a team migrating from Svix would use
// it. Run by tests/compat/test_svix_js.py:
//
//   node sdk.mjs MODULE BASE_URL API_KEY      (MODULE: svix for 2.x, svix1 for the last 1.x)
//
// Every check runs; each prints "ok" or "FAIL <why>", and the exit code is 1 if any failed.
// Deliveries reach a receiver in this process (loopback) and are verified with the SDK's own
// Webhook class and with the standardwebhooks library.
import { createServer } from "node:http";
import { randomBytes } from "node:crypto";
import assert from "node:assert/strict";
import { Webhook as StandardWebhook } from "standardwebhooks";

const [moduleName, baseUrl, apiKey] = process.argv.slice(2);
if (!moduleName || !baseUrl || !apiKey) {
  console.error("usage: node sdk.mjs MODULE BASE_URL API_KEY");
  process.exit(2);
}
const sdk = await import(moduleName);
const { Svix, Webhook } = sdk;
// No retries: a 5xx must fail the check, not be retried into a pass.
const client = (token) => new Svix(token, { serverUrl: baseUrl, retryScheduleInMs: [], requestTimeout: 10000 });
const svix = client(apiKey);
const uniq = randomBytes(6).toString("hex");
// What differs between the SDK's major versions: 2.x names an endpoint's filter `eventTypes`
// (1.x: `filterTypes`) and asks for no payload unless told (`withContent`).
const v2 = (await import(`${moduleName}/package.json`, { with: { type: "json" } })).default.version.startsWith("2.");
const filter = (types) => (v2 ? { eventTypes: types } : { filterTypes: types });

// --- a receiver on loopback: records every request by path --------------------------------
const received = new Map();
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const list = received.get(req.url) ?? [];
    list.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
    received.set(req.url, list);
    // A receiver under /disable/ asks hookd to disable the endpoint (Svix's delivery control).
    const control = req.url.includes("/disable/") ? { "webhook-delivery": "disable" } : {};
    res.writeHead(200, { "content-type": "application/json", ...control });
    res.end('{"seen":true}');
  });
});
await new Promise((ok) => receiver.listen(0, "127.0.0.1", ok));
const receiverUrl = `http://127.0.0.1:${receiver.address().port}`;
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
async function waitFor(path, count = 1, ms = 10000) {
  const until = Date.now() + ms;
  while (Date.now() < until && (received.get(path)?.length ?? 0) < count) await sleep(50);
  return received.get(path) ?? [];
}

// Runs `call`, which must fail with an HTTP error of `status`; returns the error's body.
async function refused(status, call) {
  try {
    await call();
  } catch (e) {
    assert.equal(e.code, status, `expected HTTP ${status}, got ${e.code}: ${JSON.stringify(e.body)}`);
    return e.body;
  }
  assert.fail(`expected HTTP ${status}, the call succeeded`);
}

const checks = [];
const check = (name, fn) => checks.push([name, fn]);

// --- the checks ----------------------------------------------------------------------------
check("health answers", async () => {
  await svix.health.get();
});

check("applications: create, get by uid, page forward and back (prevIterator)", async () => {
  const made = [];
  for (let i = 0; i < 3; i++) made.push(await svix.application.create({ name: `js-${uniq}-${i}`, uid: `js-${uniq}-${i}` }));
  const got = await svix.application.get(`js-${uniq}-1`);
  assert.equal(got.id, made[1].id);
  const first = await svix.application.list({ limit: 1 });
  assert.equal(first.data.length, 1);
  assert.ok(first.iterator, "a first page of one has an iterator");
  const second = await svix.application.list({ limit: 1, iterator: first.iterator });
  assert.ok(second.prevIterator, "a non-empty page has a prevIterator");
  const back = await svix.application.list({ limit: 1, iterator: second.prevIterator });
  assert.deepEqual(back.data.map((a) => a.id), first.data.map((a) => a.id));
});

check("a delivery verifies with the SDK's Webhook (svix-* headers) and standardwebhooks (webhook-*)", async () => {
  const app = await svix.application.create({ name: `sig-${uniq}` });
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/sig/${uniq}` });
  const msg = await svix.message.create(app.id, { eventType: "js.sig", payload: { hello: "js" } });
  assert.ok(msg.id.startsWith("msg_"));
  const [delivery] = await waitFor(`/sig/${uniq}`);
  assert.ok(delivery, "the message reached the endpoint");
  const { key } = await svix.endpoint.getSecret(app.id, ep.id);
  const only = (prefix) =>
    Object.fromEntries(Object.entries(delivery.headers).filter(([k]) => k.startsWith(prefix)));
  const svixHeaders = only("svix-");
  assert.deepEqual(Object.keys(svixHeaders).sort(), ["svix-id", "svix-signature", "svix-timestamp"]);
  assert.equal(svixHeaders["svix-id"], msg.id);
  new Webhook(key).verify(delivery.body, svixHeaders);
  assert.throws(() => new Webhook(key).verify('{"hello":"tampered"}', svixHeaders));
  const webhookHeaders = only("webhook-");
  new StandardWebhook(key).verify(delivery.body, webhookHeaders);
  assert.deepEqual(JSON.parse(delivery.body), { hello: "js" });
});

check("a message creates its application (application: {name, uid})", async () => {
  const uid = `implicit-${uniq}`;
  const msg = await svix.message.create(uid, { eventType: "js.implicit", payload: {}, application: { name: "Implicit", uid } });
  const app = await svix.application.get(uid);
  assert.equal(app.name, "Implicit");
  assert.equal((await svix.message.get(uid, msg.id)).id, msg.id);
});

check("deliverAt holds a message until its time", async () => {
  const app = await svix.application.create({ name: `at-${uniq}` });
  await svix.endpoint.create(app.id, { url: `${receiverUrl}/at/${uniq}` });
  const at = new Date(Date.now() + 2500);
  await svix.message.create(app.id, { eventType: "js.later", payload: { later: true }, deliverAt: at });
  await sleep(1000);
  assert.equal(received.get(`/at/${uniq}`)?.length ?? 0, 0, "delivered before deliverAt");
  const [delivery] = await waitFor(`/at/${uniq}`, 1, 10000);
  assert.ok(delivery, "never delivered");
  assert.ok(Date.now() >= at.getTime() - 50, "delivered before deliverAt");
});

check("filterTypes must name defined event types; send-example reaches only its endpoint", async () => {
  const app = await svix.application.create({ name: `ex-${uniq}` });
  await refused(422, () => svix.endpoint.create(app.id, { url: `${receiverUrl}/x`, ...filter([`missing.${uniq}`]) }));
  await svix.eventType.create({
    name: `js.ex.${uniq}`,
    description: "an example",
    schemas: { 1: { type: "object", examples: [{ first: 1 }, { second: 2 }] } },
  });
  const target = await svix.endpoint.create(app.id, { url: `${receiverUrl}/ex/${uniq}/t`, ...filter([`js.ex.${uniq}`]) });
  await svix.endpoint.create(app.id, { url: `${receiverUrl}/ex/${uniq}/o` });
  const msg = await svix.endpoint.sendExample(app.id, target.id, { eventType: `js.ex.${uniq}`, exampleIndex: 1 });
  const [delivery] = await waitFor(`/ex/${uniq}/t`);
  assert.deepEqual(JSON.parse(delivery.body), { second: 2 });
  await sleep(300);
  assert.equal(received.get(`/ex/${uniq}/o`)?.length ?? 0, 0, "the example reached another endpoint");
  const dests = await svix.messageAttempt.listAttemptedDestinations(app.id, msg.id);
  assert.deepEqual(dests.data.map((d) => d.id), [target.id]);
});

check("attempts filter by endpoint; expunge stops resends", async () => {
  const app = await svix.application.create({ name: `att-${uniq}` });
  const a = await svix.endpoint.create(app.id, { url: `${receiverUrl}/att/${uniq}/a` });
  const b = await svix.endpoint.create(app.id, { url: `${receiverUrl}/att/${uniq}/b` });
  const msg = await svix.message.create(app.id, { eventType: "js.att", payload: { secret: "pii" } });
  await waitFor(`/att/${uniq}/a`);
  await waitFor(`/att/${uniq}/b`);
  let attempts;
  for (let i = 0; i < 100; i++) {
    attempts = await svix.messageAttempt.listByMsg(app.id, msg.id, { endpointId: b.id });
    if (attempts.data.length > 0) break;
    await sleep(50);
  }
  assert.deepEqual(attempts.data.map((x) => x.endpointId), [b.id]);
  await svix.message.expungeContent(app.id, msg.id);
  const after = await svix.message.get(app.id, msg.id, { withContent: true });
  assert.deepEqual(after.payload, { expired: true });
  await refused(409, () => svix.messageAttempt.resend(app.id, msg.id, a.id));
});

check("app portal access: a token for one application only", async () => {
  const app = await svix.application.create({ name: `portal-${uniq}` });
  const other = await svix.application.create({ name: `portal-other-${uniq}` });
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/portal/${uniq}` });
  const access = await svix.authentication.appPortalAccess(app.id, {});
  assert.ok(access.url.includes("#"), "the token travels in the URL's fragment");
  assert.ok(!access.url.includes("?"), "never in a query string");
  const portal = client(access.token);
  const eps = await portal.endpoint.list(app.id);
  assert.deepEqual(eps.data.map((e) => e.id), [ep.id]);
  await refused(404, () => portal.endpoint.list(other.id));
  await refused(404, () => portal.application.list());
  await svix.authentication.expireAll(app.id, {});
  await refused(401, () => portal.endpoint.list(app.id));
});

check("operational webhooks: create, list, rotate; an event arrives signed", async () => {
  const ops = svix.operationalWebhook.endpoint;
  const made = await ops.create({ url: `${receiverUrl}/ops/${uniq}`, ...filter(["endpoint.created"]) });
  try {
    assert.ok(made.id.startsWith("ep_"));
    assert.deepEqual(v2 ? made.eventTypes : made.filterTypes, ["endpoint.created"]);
    assert.ok((await ops.list()).data.some((e) => e.id === made.id));
    const { key } = await ops.getSecret(made.id);
    const app = await svix.application.create({ name: `ops-${uniq}` });
    await svix.endpoint.create(app.id, { url: `${receiverUrl}/ops-hook/${uniq}` });
    const [req] = await waitFor(`/ops/${uniq}`);
    assert.ok(req, "the endpoint.created event arrived");
    new Webhook(key).verify(req.body, req.headers);
    const event = JSON.parse(req.body);
    assert.equal(event.type, "endpoint.created");
    assert.equal(event.data.appId, app.id);
    await ops.rotateSecret(made.id, {});
    assert.notEqual((await ops.getSecret(made.id)).key, key);
  } finally {
    await ops.delete(made.id);
  }
  await refused(404, () => ops.get(made.id));
});

// Waits until `call` answers a list with `n` items (deliveries are asynchronous).
async function listed(call, n, ms = 10000) {
  const until = Date.now() + ms;
  let page;
  while (Date.now() < until) {
    page = await call();
    if (page.data.length >= n) return page;
    await sleep(50);
  }
  return page;
}

// Three messages to one endpoint: a (channel ch-a, tag tag-a, type js.f.a), b (ch-b, tag-b,
// js.f.b), c (no labels, js.f.c).
async function labelled(name) {
  const app = await svix.application.create({ name: `${name}-${uniq}` });
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/${name}/${uniq}` });
  const a = await svix.message.create(app.id, { eventType: "js.f.a", payload: { n: "a" }, channels: ["ch-a"], tags: ["tag-a"] });
  await sleep(5);
  const b = await svix.message.create(app.id, { eventType: "js.f.b", payload: { n: "b" }, channels: ["ch-b"], tags: ["tag-b"] });
  await sleep(5);
  const c = await svix.message.create(app.id, { eventType: "js.f.c", payload: { n: "c" } });
  await waitFor(`/${name}/${uniq}`, 3);
  return { app, ep, a, b, c };
}

check("attempts by endpoint: withMsg embeds the message; channel, tag and eventTypes filter", async () => {
  const { app, ep, a, b, c } = await labelled("abe");
  const all = await listed(() => svix.messageAttempt.listByEndpoint(app.id, ep.id, { withMsg: true, withContent: true }), 3);
  assert.equal(all.data.length, 3);
  for (const at of all.data) {
    assert.ok(at.msg, "withMsg: true embeds the message");
    assert.equal(at.msg.id, at.msgId);
    assert.deepEqual(at.msg.payload, {}, "the embedded message carries no payload");
    assert.equal(at.response, '{"seen":true}', "withContent: true keeps the response");
  }
  const ids = async (opts) => (await svix.messageAttempt.listByEndpoint(app.id, ep.id, opts)).data.map((x) => x.msgId).sort();
  assert.deepEqual(await ids({ channel: "ch-a" }), [a.id]);
  assert.deepEqual(await ids({ tag: "tag-b" }), [b.id]);
  assert.deepEqual(await ids({ eventTypes: ["js.f.b", "js.f.c"] }), [b.id, c.id].sort());
  const bare = await svix.messageAttempt.listByEndpoint(app.id, ep.id, { withContent: false });
  assert.ok(bare.data.every((x) => x.response === "{}" && !x.msg), "withContent: false leaves the response out");
  const byMsg = await svix.messageAttempt.listByMsg(app.id, a.id, { withContent: false });
  assert.deepEqual(byMsg.data.map((x) => x.response), ["{}"]);
});

check("attempted messages of an endpoint filter by channel, tag, eventTypes, before and after", async () => {
  const { app, ep, a, b, c } = await labelled("am");
  const ids = async (opts) =>
    (await svix.messageAttempt.listAttemptedMessages(app.id, ep.id, opts)).data.map((m) => m.id).sort();
  assert.deepEqual(await ids({}), [a.id, b.id, c.id].sort());
  assert.deepEqual(await ids({ channel: "ch-b" }), [b.id]);
  assert.deepEqual(await ids({ tag: "tag-a" }), [a.id]);
  assert.deepEqual(await ids({ eventTypes: ["js.f.a", "js.f.c"] }), [a.id, c.id].sort());
  assert.deepEqual(await ids({ before: b.timestamp }), [a.id]);
  assert.deepEqual(await ids({ after: b.timestamp }), [c.id]);
  const withContent = await svix.messageAttempt.listAttemptedMessages(app.id, ep.id, { channel: "ch-a", withContent: true });
  assert.deepEqual(withContent.data[0].payload, { n: "a" });
});

check("endpoint stats count only what falls within since/until", async () => {
  const app = await svix.application.create({ name: `stats-${uniq}` });
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/stats/${uniq}` });
  await svix.message.create(app.id, { eventType: "js.stats", payload: {} });
  await waitFor(`/stats/${uniq}`);
  const total = (s) => s.success + s.pending + s.sending + s.fail + s.canceled;
  const now = Date.now();
  assert.equal(total(await svix.endpoint.getStats(app.id, ep.id, { since: new Date(now - 60000), until: new Date(now + 1000) })), 1);
  assert.equal(total(await svix.endpoint.getStats(app.id, ep.id, { since: new Date(now - 120000), until: new Date(now - 60000) })), 0);
});

check("eventType.delete with expunge deletes for good; creating an archived name restores it", async () => {
  const name = `js.expunge.${uniq}`;
  await svix.eventType.create({ name, description: "first" });
  await svix.eventType.delete(name);
  const restored = await svix.eventType.create({ name, description: "second" });
  assert.equal(restored.archived, false);
  assert.equal(restored.description, "second");
  await svix.eventType.delete(name, { expunge: true });
  await refused(404, () => svix.eventType.get(name));
});

check("application.list leaves out applications without endpoints, or with only disabled ones, when asked", async () => {
  const bare = await svix.application.create({ name: `bare-${uniq}` });
  const withEp = await svix.application.create({ name: `withep-${uniq}` });
  await svix.endpoint.create(withEp.id, { url: `${receiverUrl}/withep/${uniq}` });
  const off = await svix.application.create({ name: `off-${uniq}` });
  await svix.endpoint.create(off.id, { url: `${receiverUrl}/off/${uniq}`, disabled: true });
  const ids = async (opts) => (await svix.application.list({ ...opts, limit: 250 })).data.map((a) => a.id);
  const noEndpoints = await ids({ excludeAppsWithNoEndpoints: true });
  assert.ok(noEndpoints.includes(withEp.id) && noEndpoints.includes(off.id), "applications with endpoints are listed");
  assert.ok(!noEndpoints.includes(bare.id), "an application without endpoints is left out");
  const noDisabled = await ids({ excludeAppsWithDisabledEndpoints: true });
  assert.ok(noDisabled.includes(withEp.id) && noDisabled.includes(bare.id));
  assert.ok(!noDisabled.includes(off.id), "an application whose endpoints are all disabled is left out");
});

check("deliverAt is echoed by message create and get", async () => {
  const app = await svix.application.create({ name: `echo-${uniq}` });
  const at = new Date(Math.floor((Date.now() + 60000) / 1000) * 1000);
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/echo/${uniq}` });
  const msg = await svix.message.create(app.id, { eventType: "js.echo", payload: {}, deliverAt: at });
  assert.equal(msg.deliverAt?.getTime(), at.getTime());
  assert.equal((await svix.message.get(app.id, msg.id)).deliverAt?.getTime(), at.getTime());
  const [waiting] = (await svix.messageAttempt.listAttemptedMessages(app.id, ep.id)).data;
  assert.equal(waiting.deliverAt?.getTime(), at.getTime());
});

check("a receiver answering webhook-delivery: disable disables its endpoint", async () => {
  const app = await svix.application.create({ name: `dis-${uniq}` });
  const ep = await svix.endpoint.create(app.id, { url: `${receiverUrl}/disable/${uniq}` });
  await svix.message.create(app.id, { eventType: "js.disable", payload: {} });
  await waitFor(`/disable/${uniq}`);
  let got;
  for (let i = 0; i < 100; i++) {
    got = await svix.endpoint.get(app.id, ep.id);
    if (got.disabled) break;
    await sleep(50);
  }
  assert.equal(got.disabled, true, "the endpoint is disabled");
});

check("integration: create, key for its application's messages only, rotate, update, delete", async () => {
  const app = await svix.application.create({ name: `integ-${uniq}` });
  const other = await svix.application.create({ name: `integ-other-${uniq}` });
  const integ = await svix.integration.create(app.id, { name: "Zapier" });
  assert.ok(integ.id.startsWith("integ_") && integ.createdAt instanceof Date, JSON.stringify(integ));
  assert.deepEqual((await svix.integration.list(app.id)).data.map((i) => i.id), [integ.id]);
  // 2.x has no getKey: its key comes from rotateKey, as Svix documents.
  const key = v2 ? (await svix.integration.rotateKey(app.id, integ.id)).key : (await svix.integration.getKey(app.id, integ.id)).key;
  assert.ok(key.startsWith("integsk_"), key);
  const scoped = client(key);
  const msg = await scoped.message.create(app.id, { eventType: "js.integ", payload: {} });
  assert.equal((await scoped.message.get(app.id, msg.id)).id, msg.id);
  await scoped.messageAttempt.listByMsg(app.id, msg.id);
  await refused(403, () => scoped.message.list(other.id));
  await refused(403, () => scoped.endpoint.list(app.id));
  await refused(403, () => scoped.application.list());
  const rotated = (await svix.integration.rotateKey(app.id, integ.id)).key;
  await refused(401, () => scoped.message.list(app.id));
  await client(rotated).message.list(app.id);
  assert.equal((await svix.integration.update(app.id, integ.id, { name: "Make" })).name, "Make");
  await svix.integration.delete(app.id, integ.id);
  await refused(404, () => svix.integration.get(app.id, integ.id));
});

check("statistics: app usage and event types as background tasks", async () => {
  const app = await svix.application.create({ name: `stats-${uniq}`, uid: `stats-${uniq}` });
  await svix.endpoint.create(app.id, { url: `${receiverUrl}/stats/${uniq}` });
  await svix.message.create(app.id, { eventType: "js.stats", payload: {} });
  const since = new Date(Date.now() - 60000);
  const until = new Date(Date.now() + 60000);
  const started = await svix.statistics.aggregateAppStats({ since, until, appIds: [`stats-${uniq}`, `nope-${uniq}`] });
  assert.equal(started.task, "application.stats");
  assert.deepEqual(started.unresolvedAppIds, [`nope-${uniq}`]);
  let task;
  for (let i = 0; i < 100; i++) {
    task = await svix.backgroundTask.get(started.id);
    if (task.status !== "running") break;
    await sleep(50);
  }
  assert.equal(task.status, "finished");
  assert.deepEqual(task.data.appStats, [{ appId: app.id, appUid: `stats-${uniq}`, messageDestinations: 1 }]);
  const types = await svix.statistics.aggregateEventTypes();
  assert.equal(types.task, "event-type.aggregate");
});

check("ingest: a Shopify source, its endpoint, its URL token rotated, refused types", async () => {
  const source = await svix.ingest.source.create({ name: `Shop ${uniq}`, uid: `shop-${uniq}`, type: "shopify", config: { secret: `shpss_${uniq}_0123456789` } });
  // The ingest URL carries a secret token: /in/{id}/{token}; rotating it gives another.
  assert.ok(source.id.startsWith("src_") && source.ingestUrl.includes(`/in/${source.id}/`), JSON.stringify(source));
  const rotated = await svix.ingest.source.rotateToken(source.id);
  assert.ok(rotated.ingestUrl.includes(`/in/${source.id}/`) && rotated.ingestUrl !== source.ingestUrl, JSON.stringify(rotated));
  assert.equal((await svix.ingest.source.get(`shop-${uniq}`)).id, source.id);
  assert.ok((await svix.ingest.source.list({ limit: 250 })).data.some((s) => s.id === source.id));
  const ep = await svix.ingest.endpoint.create(source.id, { url: `${receiverUrl}/ingest/${uniq}` });
  assert.deepEqual((await svix.ingest.endpoint.list(source.id)).data.map((e) => e.id), [ep.id]);
  assert.ok((await svix.ingest.endpoint.getSecret(source.id, ep.id)).key.startsWith("whsec_"));
  // Telnyx signs with Ed25519, not a shared secret: hookd has no scheme for it.
  const body = await refused(422, () => svix.ingest.source.create({ name: `Telnyx ${uniq}`, type: "telnyx", config: { publicKey: "x" } }));
  assert.ok(JSON.stringify(body).includes("telnyx"), JSON.stringify(body));
  await svix.ingest.source.delete(source.id);
  await refused(404, () => svix.ingest.source.get(source.id));
});

if (!v2) {
  check("authentication.dashboardAccess (1.x) answers a portal URL and token", async () => {
    const app = await svix.application.create({ name: `dash-${uniq}` });
    const out = await svix.authentication.dashboardAccess(app.id);
    assert.ok(out.url.endsWith(out.token) && out.token.startsWith("hkp_"), JSON.stringify(out));
    await client(out.token).endpoint.list(app.id);
  });
}

// --- run them all ----------------------------------------------------------------------------
let failed = 0;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.log(`ok    ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL  ${name}\n      ${(e.stack ?? String(e)).split("\n").slice(0, 4).join("\n      ")}`);
  }
}
receiver.close();
console.log(`${moduleName}: ${checks.length - failed} of ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
