// Receiving webhooks in your own handler, the pattern of README "Receiving webhooks", in Node:
// verify the signature on the raw bytes (standardwebhooks), record the event id insert-first
// in an inbox table (PostgreSQL, `pg`), acknowledge at once, and do the work off the request.
//
//   npm i standardwebhooks pg
//   WEBHOOK_SECRET=whsec_... DATABASE_URL=postgres://... node receive_inbox.mjs [port]
//
// Prints `listening on PORT`, then `handled <webhook-id> <body>` once per event, however many
// times it is delivered. Tested by tests/compat/test_receiver_examples.py against a live hookd.
import http from "node:http";
import pg from "pg";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.WEBHOOK_SECRET); // whsec_…
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await db.query(
  "CREATE TABLE IF NOT EXISTS webhook_inbox (source text NOT NULL, event_id text NOT NULL, " +
    "received_at bigint NOT NULL, PRIMARY KEY (source, event_id))",
);
const work = []; // your queue: the work happens off the request
setInterval(() => {
  for (const { id, body } of work.splice(0)) console.log("handled", id, body);
}, 50);

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const rawBody = Buffer.concat(chunks).toString("utf8");
      try {
        wh.verify(rawBody, req.headers); // throws on a bad signature: 401
      } catch {
        res.writeHead(401).end();
        return;
      }
      try {
        const { rowCount } = await db.query(
          "INSERT INTO webhook_inbox (source, event_id, received_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
          ["hookd", req.headers["webhook-id"], Date.now()],
        );
        if (rowCount === 1) work.push({ id: req.headers["webhook-id"], body: rawBody }); // new
        res.writeHead(200).end(); // new or duplicate, acknowledge fast
      } catch {
        res.writeHead(503).end(); // not recorded: the sender retries
      }
    });
  })
  .listen(Number(process.argv[2] ?? 0), "127.0.0.1", function () {
    console.log("listening on", this.address().port);
  });
