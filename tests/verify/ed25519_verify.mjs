// Verifies Standard Webhooks' asymmetric signatures (`v1a,` + base64 ed25519 over
// `{webhook-id}.{webhook-timestamp}.{body}`) with Node's own crypto (OpenSSL), independent of
// hookd's signing code. The reference `standardwebhooks` libraries (Python 1.1.0, npm 1.1.1)
// implement only `v1`. Reads {"publicKey": "whpk_…", "requests": [{headers, body}]} on stdin;
// prints "verified N" and exits 0 when every request carries a valid `v1a` entry, else exits 1.
import { createPublicKey, verify } from "node:crypto";

const input = JSON.parse(await new Promise((done) => {
  let text = "";
  process.stdin.on("data", (c) => (text += c));
  process.stdin.on("end", () => done(text));
}));
const raw = Buffer.from(input.publicKey.replace(/^whpk_/, ""), "base64");
// An ed25519 SubjectPublicKeyInfo is this fixed prefix and the 32-byte key.
const spki = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]);
const key = createPublicKey({ key: spki, format: "der", type: "spki" });
let ok = 0;
for (const { headers, body } of input.requests) {
  const signed = Buffer.from(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`);
  const good = headers["webhook-signature"].split(" ").some((entry) => {
    const [version, sig] = entry.split(",");
    return version === "v1a" && verify(null, signed, key, Buffer.from(sig, "base64"));
  });
  if (!good) {
    console.error(`no valid v1a signature on ${headers["webhook-id"]}`);
    process.exit(1);
  }
  ok += 1;
}
console.log(`verified ${ok}`);
