"""Receiving webhooks in your own handler, the pattern of README "Receiving webhooks": verify
the signature on the raw bytes (standardwebhooks), record the event id insert-first in an
inbox table, acknowledge at once, and do the work off the request.

    pip install standardwebhooks
    WEBHOOK_SECRET=whsec_... python3 examples/receive_inbox.py [port] [inbox.db]

Prints `listening on PORT`, then `handled <webhook-id> <body>` once per event, however many
times it is delivered. Tested by tests/compat/test_receiver_examples.py against a live hookd.
"""

import os
import queue
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

wh = Webhook(os.environ["WEBHOOK_SECRET"])  # whsec_…
db = sqlite3.connect(sys.argv[2] if len(sys.argv) > 2 else "inbox.db", check_same_thread=False)
db.execute(
    "CREATE TABLE IF NOT EXISTS webhook_inbox (source TEXT NOT NULL, event_id TEXT NOT NULL, "
    "received_at INTEGER NOT NULL, PRIMARY KEY (source, event_id))"
)
db_lock = threading.Lock()
work: "queue.Queue[tuple[str, bytes]]" = queue.Queue()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        raw_body = self.rfile.read(min(int(self.headers.get("content-length") or 0), 1 << 20))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            wh.verify(raw_body, headers)  # raises on a bad signature: answer 401
        except WebhookVerificationError:
            return self.answer(401)
        event_id = headers["webhook-id"]
        with db_lock, db:  # one transaction: the insert is the dedup
            new = db.execute(
                "INSERT INTO webhook_inbox (source, event_id, received_at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                ("hookd", event_id, int(time.time())),
            ).rowcount
        if new:
            work.put((event_id, raw_body))  # new: the work happens off the request
        self.answer(200)  # new or duplicate, acknowledge fast

    def answer(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def worker():
    while True:
        event_id, body = work.get()
        print("handled", event_id, body.decode(), flush=True)


threading.Thread(target=worker, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
print("listening on", server.server_address[1], flush=True)
server.serve_forever()
