"""OTLP log export, read by the official OpenTelemetry protobuf definitions.

A hookd of its own (on PostgreSQL, on a database of its own too: a second server on the suite's
database could hold the endpoint's lease and deliver, and log, in its place) exports to a
loopback collector that parses every request body as OTLP/HTTP
protobuf (`ExportLogsServiceRequest`, and `ExportTraceServiceRequest` for the traces sent
beside them), as an OpenTelemetry collector's OTLP/HTTP receiver would.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from svix.api import ApplicationIn, EndpointIn, MessageIn

import hookd_server
from conftest import Receiver, make_client


class Collector:
    """POST /v1/logs and /v1/traces: parses the body as OTLP protobuf; 200 when it parses."""

    def __init__(self) -> None:
        self.requests: list[ExportLogsServiceRequest] = []
        self.traces = 0
        self.errors: list[str] = []
        self.receiver = Receiver(answer=self.answer)
        self.url = self.receiver.url

    def answer(self, request: dict) -> int:
        kinds = {"/v1/logs": ExportLogsServiceRequest, "/v1/traces": ExportTraceServiceRequest}
        kind = kinds.get(request["path"])
        if kind is None:
            self.errors.append(f"posted to {request['path']}")
            return 404
        content_type = request["headers"].get("content-type", "")
        if not content_type.startswith("application/x-protobuf"):
            self.errors.append(f"content-type {content_type}")
            return 415
        try:
            parsed = kind.FromString(request["body"])
        except DecodeError as e:
            self.errors.append(str(e))
            return 400
        if kind is ExportLogsServiceRequest:
            self.requests.append(parsed)
        else:
            self.traces += 1
        return 200

    @property
    def raw(self) -> list[bytes]:
        with self.receiver.lock:
            return [r["body"] for r in self.receiver.requests]

    def records(self):
        with self.receiver.lock:
            return [
                (rl.resource, rec)
                for req in self.requests
                for rl in req.resource_logs
                for sl in rl.scope_logs
                for rec in sl.log_records
            ]

    def close(self) -> None:
        self.receiver.close()


def attrs(record) -> dict:
    out = {}
    for kv in record.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


@pytest.fixture
def collector():
    c = Collector()
    try:
        yield c
    finally:
        c.close()


def test_delivery_logs_reach_an_otlp_collector_with_every_id_and_no_payload(
    tmp_path, collector, receiver, uniq
):
    shared = hookd_server.database_url(tmp_path)
    own_db = (
        hookd_server.own_postgres_database(shared, f"hookd_otlp_{uniq}")
        if shared.startswith("postgres")
        else contextlib.nullcontext()
    )
    with own_db as own:
        run_and_check(tmp_path, collector, receiver, uniq, own)


def run_and_check(tmp_path, collector, receiver, uniq, own_db):
    server = hookd_server.start(
        tmp_path,
        env={
            "HOOKD_OTLP_ENDPOINT": collector.url,
            "HOOKD_LOG_LEVEL": "info,dispatcher=debug",
        },
        own_db=own_db,
    )
    try:
        svix = make_client(server.base_url, server.api_key)
        app = svix.application.create(ApplicationIn(name=f"otlp-{uniq}"))
        ep = svix.endpoint.create(
            app.id, EndpointIn(url=f"http://127.0.0.1:{receiver.port}/otlp/{uniq}")
        )
        secret_payload = f"never-log-{uniq}"
        msg = svix.message.create(
            app.id, MessageIn(event_type="a.b", payload={"secret": secret_payload})
        )
        deadline = time.monotonic() + 15
        attempt = None
        while time.monotonic() < deadline and attempt is None:
            for resource, rec in collector.records():
                if rec.body.string_value == "delivery attempt" and attrs(rec).get("msg_id") == msg.id:
                    attempt = (resource, rec)
            time.sleep(0.1)
    finally:
        code = server.stop()
    assert code == 0
    assert collector.errors == [], collector.errors
    assert attempt is not None, f"no delivery attempt record; got {len(collector.records())} records"
    resource, rec = attempt
    res = attrs(resource)
    assert res["service.name"] == "hookd"
    assert res["service.version"]
    a = attrs(rec)
    assert a["app_id"] == app.id
    assert a["endpoint_id"] == ep.id
    assert a["tenant_id"]
    assert a["attempt"] == 1
    assert a["status"] == 200
    assert a["outcome"] == "delivered"
    assert rec.severity_number == 5  # SEVERITY_NUMBER_DEBUG
    assert rec.time_unix_nano > 1_700_000_000 * 10**9
    # The start-up line arrived too, at INFO, and the stop flushed the last batch.
    assert any(r.severity_number == 9 for _, r in collector.records())
    raw = collector.raw
    assert secret_payload.encode() not in b"".join(raw), "the payload reached the exported logs"
    assert collector.traces > 0, "no traces exported beside the logs"
