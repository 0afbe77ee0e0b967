// What every browser suite needs around the browser: a free port, waiting for a server to
// answer, a pause, and a line per step.
import { createServer } from 'node:net';

export function freePort(host = '127.0.0.1') {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, host, () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `url` until it answers 2xx, for at most 30 s. */
export async function waitUp(url) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`${url} did not come up`);
}

export function step(text) {
  console.log(`• ${text}`);
}
