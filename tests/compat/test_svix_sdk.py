"""Black-box compatibility: the official Svix Python SDK, unmodified, against a live hookd.

Every call goes through the SDK's own request building and response parsing (pydantic models),
so a field hookd leaves out, names differently or types wrongly fails here as it would for a
user. Endpoints point at a loopback receiver that answers 200: with a dispatcher running,
deliveries move on from pending (and the signed-delivery test checks what arrives); without
one they stay pending. Assertions on delivery state accept either.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from svix.api import (
    ApplicationIn,
    ApplicationPatch,
    EndpointHeadersIn,
    EndpointHeadersPatchIn,
    EndpointIn,
    EndpointListOptions,
    EndpointPatch,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    EventTypeIn,
    EventTypeListOptions,
    EventTypePatch,
    EventTypeUpsertIn,
    MessageAttemptListAttemptedMessagesOptions,
    MessageAttemptListByEndpointOptions,
    MessageAttemptListByMsgOptions,
    MessageCreateOptions,
    MessageGetOptions,
    MessageIn,
    MessageListOptions,
    RecoverIn,
    ReplayIn,
)
from svix.api.application import ApplicationListOptions
from svix.exceptions import HttpError, HTTPValidationError
from svix.webhooks import Webhook


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _endpoint(svix, app, port, uniq, **kw):
    return svix.endpoint.create(
        app.id,
        EndpointIn(url=f"http://127.0.0.1:{port}/hook/{uniq}", **kw),
    )


def _status(exc_info) -> int:
    return exc_info.value.status_code


# --- health ---------------------------------------------------------------------------------


def test_health(svix):
    # Svix's health answers 204 with no body; the SDK ignores the body either way.
    svix.health.get()


def test_missing_or_wrong_key_is_401(server):
    base_url, _ = server
    r = httpx.get(f"{base_url}/api/v1/app")
    assert r.status_code == 401, r.text
    r = httpx.get(f"{base_url}/api/v1/app", headers={"Authorization": "Bearer hk_nope"})
    assert r.status_code == 401, r.text
    assert set(r.json()) >= {"code", "detail"}


# --- applications ---------------------------------------------------------------------------


def test_application_create_get_list(svix, uniq):
    created = svix.application.create(
        ApplicationIn(name=f"App {uniq}", uid=f"uid-{uniq}", metadata={"team": "a"})
    )
    assert created.id
    assert created.name == f"App {uniq}"
    assert created.uid == f"uid-{uniq}"
    assert created.metadata == {"team": "a"}

    by_id = svix.application.get(created.id)
    by_uid = svix.application.get(f"uid-{uniq}")
    assert by_id.id == by_uid.id == created.id
    assert by_id.created_at == created.created_at

    listed = svix.application.list(ApplicationListOptions(limit=250))
    assert created.id in [a.id for a in listed.data]


def test_application_get_or_create_twice_returns_same(svix, uniq):
    a = svix.application.get_or_create(ApplicationIn(name="goc", uid=f"goc-{uniq}"))
    b = svix.application.get_or_create(ApplicationIn(name="goc", uid=f"goc-{uniq}"))
    assert a.id == b.id


def test_application_duplicate_uid_is_409(svix, uniq):
    svix.application.create(ApplicationIn(name="dup", uid=f"dup-{uniq}"))
    with pytest.raises(HttpError) as e:
        svix.application.create(ApplicationIn(name="dup", uid=f"dup-{uniq}"))
    assert _status(e) == 409


def test_application_patch_upsert_delete(svix, app, uniq):
    patched = svix.application.patch(app.id, ApplicationPatch(name="renamed"))
    assert patched.name == "renamed"
    assert patched.uid == app.uid

    updated = svix.application.upsert(app.id, ApplicationIn(name="put", metadata={"k": "v"}))
    assert updated.id == app.id
    assert updated.name == "put"
    assert updated.metadata == {"k": "v"}

    # PUT on an unknown uid creates it (Svix's upsert).
    fresh = svix.application.upsert(f"new-{uniq}", ApplicationIn(name="created by put"))
    assert svix.application.get(f"new-{uniq}").id == fresh.id

    svix.application.delete(app.id)
    with pytest.raises(HttpError) as e:
        svix.application.get(app.id)
    assert _status(e) == 404


def test_application_paging(svix, uniq):
    ids = {
        svix.application.create(ApplicationIn(name=f"page-{uniq}-{i}")).id for i in range(5)
    }
    seen: list[str] = []
    iterator = None
    for _ in range(100):
        page = svix.application.list(ApplicationListOptions(limit=2, iterator=iterator))
        assert len(page.data) <= 2
        seen.extend(a.id for a in page.data)
        if page.done:
            break
        iterator = page.iterator
        assert iterator
    assert ids <= set(seen)
    assert len(seen) == len(set(seen)), "an application appeared on two pages"


def test_other_tenant_gets_404(svix, other_svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    msg = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"x": 1}))
    calls = [
        lambda: other_svix.application.get(app.id),
        lambda: other_svix.application.get(app.uid),
        lambda: other_svix.endpoint.list(app.id),
        lambda: other_svix.endpoint.get(app.id, ep.id),
        lambda: other_svix.endpoint.get_secret(app.id, ep.id),
        lambda: other_svix.message.list(app.id),
        lambda: other_svix.message.get(app.id, msg.id),
        lambda: other_svix.message_attempt.list_by_msg(app.id, msg.id),
        lambda: other_svix.message_attempt.list_by_endpoint(app.id, ep.id),
        lambda: other_svix.message_attempt.resend(app.id, msg.id, ep.id),
        lambda: other_svix.application.delete(app.id),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(HttpError) as e:
            call()
        assert _status(e) == 404, f"call #{i}"
    # Nothing was touched.
    assert svix.application.get(app.id).id == app.id
    assert app.id not in [a.id for a in other_svix.application.list().data]


# --- event types ----------------------------------------------------------------------------


def test_event_type_create_get_list_patch_upsert_delete(svix, uniq):
    name = f"user.created-{uniq}"
    schema = {"1": {"type": "object", "properties": {"id": {"type": "string"}}}}
    created = svix.event_type.create(
        EventTypeIn(name=name, description="A user was created", schemas=schema)
    )
    assert created.name == name
    assert created.description == "A user was created"
    assert created.deprecated is False

    got = svix.event_type.get(name)
    assert got.name == name
    assert got.schemas == schema

    listed = svix.event_type.list(EventTypeListOptions(limit=250, with_content=True))
    assert name in [e.name for e in listed.data]

    patched = svix.event_type.patch(name, EventTypePatch(description="patched"))
    assert patched.description == "patched"

    upserted = svix.event_type.upsert(name, EventTypeUpsertIn(description="put", deprecated=True))
    assert upserted.description == "put"
    assert upserted.deprecated is True

    svix.event_type.delete(name)
    # Delete archives: hidden by default, listed with include_archived.
    names = [e.name for e in svix.event_type.list(EventTypeListOptions(limit=250)).data]
    assert name not in names
    archived = svix.event_type.list(EventTypeListOptions(limit=250, include_archived=True)).data
    assert [e.archived for e in archived if e.name == name] == [True]


def test_event_type_duplicate_is_409(svix, uniq):
    svix.event_type.create(EventTypeIn(name=f"dup.{uniq}", description="d"))
    with pytest.raises(HttpError) as e:
        svix.event_type.create(EventTypeIn(name=f"dup.{uniq}", description="d"))
    assert _status(e) == 409


# --- endpoints ------------------------------------------------------------------------------


def test_endpoint_create_get_list(svix, app, base_port, uniq):
    # Endpoints filter only on defined event types (Svix answers 422 otherwise).
    try:
        svix.event_type.create(EventTypeIn(name="user.created", description="a user"))
    except HttpError as e:
        assert e.status_code == 409
    ep = _endpoint(
        svix, app, base_port, uniq,
        uid=f"ep-{uniq}", description="primary", metadata={"m": "1"},
        channels=["project_1"], event_types=["user.created"],
    )
    assert ep.id
    assert ep.url == f"http://127.0.0.1:{base_port}/hook/{uniq}"
    assert ep.description == "primary"
    assert ep.uid == f"ep-{uniq}"
    assert ep.metadata == {"m": "1"}
    assert ep.channels == ["project_1"]
    assert ep.event_types == ["user.created"]
    assert not ep.disabled

    assert svix.endpoint.get(app.id, ep.id).id == ep.id
    assert svix.endpoint.get(app.id, f"ep-{uniq}").id == ep.id
    # The application can be named by uid too.
    assert svix.endpoint.get(app.uid, ep.id).id == ep.id

    listed = svix.endpoint.list(app.id)
    assert [e.id for e in listed.data] == [ep.id]
    assert listed.done is True


def test_endpoint_list_paging(svix, app, base_port, uniq):
    ids = [_endpoint(svix, app, base_port, f"{uniq}-{i}").id for i in range(5)]
    seen: list[str] = []
    iterator = None
    for _ in range(10):
        page = svix.endpoint.list(app.id, EndpointListOptions(limit=2, iterator=iterator))
        seen.extend(e.id for e in page.data)
        if page.done:
            break
        iterator = page.iterator
    assert sorted(seen) == sorted(ids)
    # Newest first.
    assert seen == list(reversed(ids))


def test_endpoint_patch_and_upsert(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq, description="before")
    patched = svix.endpoint.patch(
        app.id, ep.id, EndpointPatch(description="after", disabled=True, metadata={"a": "b"})
    )
    assert patched.description == "after"
    assert patched.disabled is True
    assert patched.metadata == {"a": "b"}
    assert patched.url == ep.url

    reenabled = svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=False))
    assert not reenabled.disabled

    new_url = f"http://127.0.0.1:{base_port}/other/{uniq}"
    updated = svix.endpoint.upsert(
        app.id, ep.id, EndpointUpsertIn(url=new_url, description="put", channels=["c1"])
    )
    assert updated.id == ep.id
    assert updated.url == new_url
    assert updated.description == "put"
    assert updated.channels == ["c1"]
    assert svix.endpoint.get(app.id, ep.id).url == new_url


def test_endpoint_upsert_creates_unknown_uid(svix, app, base_port, uniq):
    created = svix.endpoint.upsert(
        app.id, f"put-{uniq}", EndpointUpsertIn(url=f"http://127.0.0.1:{base_port}/p")
    )
    assert created.uid == f"put-{uniq}"
    assert svix.endpoint.get(app.id, f"put-{uniq}").id == created.id


def test_endpoint_secret_get_and_rotate(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    before = svix.endpoint.get_secret(app.id, ep.id).key
    assert before.startswith("whsec_")
    assert 24 <= len(base64.b64decode(before[len("whsec_"):])) <= 64

    svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn())
    after = svix.endpoint.get_secret(app.id, ep.id).key
    assert after.startswith("whsec_")
    assert after != before

    chosen = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn(key=chosen))
    assert svix.endpoint.get_secret(app.id, ep.id).key == chosen


def test_endpoint_created_with_secret(svix, app, base_port, uniq):
    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    ep = _endpoint(svix, app, base_port, uniq, secret=secret)
    assert svix.endpoint.get_secret(app.id, ep.id).key == secret


def test_endpoint_headers(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq, headers={"X-Initial": "1"})
    assert svix.endpoint.get_headers(app.id, ep.id).headers == {"X-Initial": "1"}

    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-A": "a", "X-B": "b"}))
    h = svix.endpoint.get_headers(app.id, ep.id)
    assert h.headers == {"X-A": "a", "X-B": "b"}
    assert isinstance(h.sensitive, list)

    svix.endpoint.patch_headers(
        app.id, ep.id, EndpointHeadersPatchIn(headers={"X-C": "c"}, delete_headers=["X-A"])
    )
    assert svix.endpoint.get_headers(app.id, ep.id).headers == {"X-B": "b", "X-C": "c"}


def _deliveries(stats) -> int:
    return stats.success + stats.pending + stats.sending + stats.fail + stats.canceled


def test_endpoint_stats_count_deliveries(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    zero = svix.endpoint.get_stats(app.id, ep.id)
    assert (zero.success, zero.pending, zero.sending, zero.fail, zero.canceled) == (0, 0, 0, 0, 0)
    for i in range(3):
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"i": i}))
    stats = svix.endpoint.get_stats(app.id, ep.id)
    # Pending until a dispatcher sends them; then sending/success (the receiver answers 200).
    assert _deliveries(stats) == 3
    assert stats.fail == stats.canceled == 0


def test_endpoint_delete(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    svix.endpoint.delete(app.id, ep.id)
    with pytest.raises(HttpError) as e:
        svix.endpoint.get(app.id, ep.id)
    assert _status(e) == 404
    assert svix.endpoint.list(app.id).data == []


def test_endpoint_url_outside_allow_list_is_refused(svix, app):
    # The fixture allows loopback only; the unspecified address stays refused. (An address
    # that, if wrongly accepted, could only ever be delivered to on this machine.)
    with pytest.raises((HttpError, HTTPValidationError)) as e:
        svix.endpoint.create(app.id, EndpointIn(url="http://0.0.0.0:9/hook"))
    assert 400 <= _status(e) < 500


# --- recover / replay -----------------------------------------------------------------------


def test_endpoint_recover_returns_running_task(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"n": 1}))
    out = svix.endpoint.recover(app.id, ep.id, RecoverIn(since=_now() - timedelta(hours=1)))
    assert out.id
    assert out.status.value == "running"
    assert out.task.value == "endpoint.recover"


def test_background_task_get_after_recover(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    started = svix.endpoint.recover(app.id, ep.id, RecoverIn(since=_now() - timedelta(hours=1)))
    task = svix.background_task.get(started.id)
    assert task.id == started.id
    assert task.task.value == "endpoint.recover"
    assert task.status.value in ("running", "finished")


def test_endpoint_recover_with_until(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    out = svix.endpoint.recover(
        app.id, ep.id, RecoverIn(since=_now() - timedelta(days=1), until=_now())
    )
    assert out.task.value == "endpoint.recover"


def test_endpoint_replay_missing(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"n": 1}))
    out = svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=_now() - timedelta(hours=1)))
    assert out.id
    assert out.status.value in ("running", "finished")
    assert out.task.value == "endpoint.replay"


# --- messages -------------------------------------------------------------------------------


def test_message_create_list_get(svix, app, base_port, uniq):
    _endpoint(svix, app, base_port, uniq)
    payload = {"type": "invoice.paid", "amount": 1250, "nested": {"ok": True, "list": [1, "2"]}}
    msg = svix.message.create(
        app.id,
        MessageIn(event_type="invoice.paid", event_id=f"evt-{uniq}", payload=payload,
                  channels=["billing"], tags=["t1"]),
        MessageCreateOptions(with_content=True),
    )
    assert msg.id
    assert msg.event_type == "invoice.paid"
    assert msg.event_id == f"evt-{uniq}"
    assert msg.payload == payload
    assert msg.channels == ["billing"]
    assert msg.tags == ["t1"]

    got = svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True))
    assert got.id == msg.id
    assert got.payload == payload
    assert got.timestamp == msg.timestamp

    by_event_id = svix.message.get(app.id, f"evt-{uniq}")
    assert by_event_id.id == msg.id

    listed = svix.message.list(app.id, MessageListOptions(with_content=True))
    assert [m.id for m in listed.data] == [msg.id]
    assert listed.data[0].payload == payload


def test_message_sdk_default_without_content(svix, app):
    # SDK v2 sends with_content=false by default: payload comes back as {}.
    msg = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"secret": 1}))
    assert msg.payload == {}
    assert svix.message.get(app.id, msg.id).payload == {}
    assert svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True)).payload == {
        "secret": 1
    }


def test_message_list_filters_and_paging(svix, app):
    ids = []
    for i in range(5):
        et = "even.type" if i % 2 == 0 else "odd.type"
        ids.append(
            svix.message.create(
                app.id,
                MessageIn(event_type=et, payload={"i": i}, channels=[f"ch{i % 2}"],
                          tags=[f"tag{i}"]),
            ).id
        )
    seen: list[str] = []
    iterator = None
    for _ in range(10):
        page = svix.message.list(app.id, MessageListOptions(limit=2, iterator=iterator))
        seen.extend(m.id for m in page.data)
        if page.done:
            break
        iterator = page.iterator
    assert seen == list(reversed(ids)), "newest first, each message once"

    evens = svix.message.list(app.id, MessageListOptions(event_types=["even.type"]))
    assert sorted(m.id for m in evens.data) == sorted(ids[0::2])
    both = svix.message.list(app.id, MessageListOptions(event_types=["even.type", "odd.type"]))
    assert len(both.data) == 5
    ch1 = svix.message.list(app.id, MessageListOptions(channel="ch1"))
    assert sorted(m.id for m in ch1.data) == sorted(ids[1::2])
    tagged = svix.message.list(app.id, MessageListOptions(tag="tag3"))
    assert [m.id for m in tagged.data] == [ids[3]]
    future = svix.message.list(app.id, MessageListOptions(after=_now() + timedelta(hours=1)))
    assert future.data == []
    past = svix.message.list(app.id, MessageListOptions(before=_now() - timedelta(hours=1)))
    assert past.data == []


def test_message_repeated_event_id_is_409(svix, app, uniq):
    svix.message.create(app.id, MessageIn(event_type="a.b", event_id=f"once-{uniq}", payload={}))
    with pytest.raises(HttpError) as e:
        svix.message.create(
            app.id, MessageIn(event_type="a.b", event_id=f"once-{uniq}", payload={})
        )
    assert _status(e) == 409


def test_message_idempotency_key(svix, app, uniq):
    key = f"idem-{uniq}"
    body = MessageIn(event_type="a.b", payload={"v": 1})
    first = svix.message.create(app.id, body, MessageCreateOptions(idempotency_key=key))
    second = svix.message.create(app.id, body, MessageCreateOptions(idempotency_key=key))
    assert first.id == second.id
    assert len(svix.message.list(app.id).data) == 1


def test_concurrent_message_creates_never_5xx(server, app, base_port, uniq):
    """A few SDK clients sending at once (as any real producer fleet does) get no 5xx: the
    store must serialize its writers instead of answering `database is locked`."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import make_client

    base_url, api_key = server
    setup = make_client(base_url, api_key)
    _endpoint(setup, app, base_port, uniq)

    def send(worker: int) -> list[str]:
        client = make_client(base_url, api_key)
        errors = []
        for i in range(20):
            try:
                client.message.create(
                    app.id, MessageIn(event_type="load.test", payload={"w": worker, "i": i})
                )
            except HttpError as e:
                errors.append(f"{e.status_code} {e.code}: {e.detail}")
        return errors

    with ThreadPoolExecutor(4) as pool:
        errors = [e for errs in pool.map(send, range(4)) for e in errs]
    assert errors == [], f"{len(errors)} of 80 creates failed, e.g. {errors[:3]}"
    assert _deliveries(setup.endpoint.get_stats(app.id, _only_endpoint(setup, app))) == 80


def _only_endpoint(svix, app) -> str:
    (ep,) = svix.endpoint.list(app.id).data
    return ep.id


def test_message_to_unknown_app_is_404(svix, uniq):
    with pytest.raises(HttpError) as e:
        svix.message.create(f"no-such-app-{uniq}", MessageIn(event_type="a.b", payload={}))
    assert _status(e) == 404


# --- attempts -------------------------------------------------------------------------------


def test_attempt_lists_and_resend(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    msg = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"k": "v"}))

    by_msg = svix.message_attempt.list_by_msg(app.id, msg.id)
    assert isinstance(by_msg.data, list)
    assert by_msg.done is True
    by_ep = svix.message_attempt.list_by_endpoint(app.id, ep.id)
    assert isinstance(by_ep.data, list)
    assert by_ep.done is True

    # Status filters are accepted.
    svix.message_attempt.list_by_msg(app.id, msg.id, MessageAttemptListByMsgOptions(status=2))
    svix.message_attempt.list_by_endpoint(
        app.id, ep.id, MessageAttemptListByEndpointOptions(status=0)
    )

    svix.message_attempt.resend(app.id, msg.id, ep.id)
    # Resend re-arms the one delivery of this message to this endpoint; it adds none.
    assert _deliveries(svix.endpoint.get_stats(app.id, ep.id)) == 1


def test_list_attempted_messages(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    msg = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"k": 1}))
    out = svix.message_attempt.list_attempted_messages(
        app.id, ep.id, MessageAttemptListAttemptedMessagesOptions(with_content=True)
    )
    assert [m.id for m in out.data] == [msg.id]
    # Pending until a dispatcher picks it up; then sending or success (the receiver says 200).
    m = out.data[0]
    texts = {0: "success", 1: "pending", 3: "sending"}
    assert m.status.value in texts
    assert m.status_text.value == texts[m.status.value]
    assert m.payload == {"k": 1}


def test_delivery_is_signed_for_the_sdk(svix, app, receiver, base_port, uniq):
    """Once a dispatcher runs, what reaches the endpoint verifies with the SDK's own
    `Webhook.verify` and the endpoint's secret, and the attempt lists parse. Skipped while
    nothing is delivered (no dispatcher in this build)."""
    ep = _endpoint(svix, app, base_port, uniq)
    secret = svix.endpoint.get_secret(app.id, ep.id).key
    payload = {"type": "invoice.paid", "id": uniq, "n": [1, 2.5, None, "x"]}
    msg = svix.message.create(app.id, MessageIn(event_type="invoice.paid", payload=payload))
    got = receiver.wait_for(f"/hook/{uniq}", timeout=10.0)
    if not got:
        pytest.skip("nothing delivered within 10 s: no dispatcher in this hookd build")
    req = got[0]
    Webhook(secret).verify(req["body"], dict(req["headers"]))
    assert json.loads(req["body"]) == payload
    assert req["headers"].get("webhook-id", req["headers"].get("svix-id")) == msg.id

    # The attempt shows up, in the SDK's shape.
    deadline = time.monotonic() + 10
    attempts = []
    while time.monotonic() < deadline:
        attempts = svix.message_attempt.list_by_msg(app.id, msg.id).data
        if attempts:
            break
        time.sleep(0.1)
    assert attempts, "delivered, but list_by_msg shows no attempt"
    a = attempts[0]
    assert (a.msg_id, a.endpoint_id) == (msg.id, ep.id)
    assert a.response_status_code == 200
    assert a.status.value == 0 and a.status_text.value == "success"
    by_ep = svix.message_attempt.list_by_endpoint(app.id, ep.id).data
    assert a.id in [x.id for x in by_ep]


def test_resend_unknown_message_is_404(svix, app, base_port, uniq):
    ep = _endpoint(svix, app, base_port, uniq)
    with pytest.raises(HttpError) as e:
        svix.message_attempt.resend(app.id, f"msg_nope{uniq}", ep.id)
    assert _status(e) == 404


def test_svix_operation_hookd_lacks_fails_as_an_http_error(svix, app, base_port, uniq):
    """Svix operations hookd does not implement must fail the way the SDK understands (an
    HttpError from a JSON `{code, detail}` body), not with a JSON parse error."""
    ep = _endpoint(svix, app, base_port, uniq)
    msg = svix.message.create(app.id, MessageIn(event_type="a.b", payload={}))
    calls = {
        "endpoint.get_attempt_stats": lambda: svix.endpoint.get_attempt_stats(app.id, ep.id),
        "message_attempt.list_attempted_destinations":
            lambda: svix.message_attempt.list_attempted_destinations(app.id, msg.id),
    }
    for name, call in calls.items():
        try:
            call()  # implemented one day: then it must simply work
        except HttpError as e:
            assert e.status_code in (404, 405), name
        except json.JSONDecodeError as e:
            pytest.fail(f"{name}: error response is not JSON ({e})")


def test_full_flow(svix, base_port, uniq):
    """The issue's walk-through, start to end, with one application."""
    app = svix.application.get_or_create(ApplicationIn(name="Flow", uid=f"flow-{uniq}"))
    svix.event_type.create(EventTypeIn(name=f"flow.{uniq}", description="flow"))
    ep = _endpoint(svix, app, base_port, uniq, event_types=[f"flow.{uniq}"])
    s1 = svix.endpoint.get_secret(app.id, ep.id).key
    svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn())
    assert svix.endpoint.get_secret(app.id, ep.id).key != s1

    msgs = [
        svix.message.create(app.id, MessageIn(event_type=f"flow.{uniq}", payload={"n": n}))
        for n in range(3)
    ]
    # Filtered out by the endpoint's event types: no delivery.
    svix.message.create(app.id, MessageIn(event_type="other.type", payload={}))
    assert _deliveries(svix.endpoint.get_stats(app.id, ep.id)) == 3
    assert len(svix.message.list(app.id).data) == 4
    for m in msgs:
        assert svix.message.get(app.id, m.id).id == m.id
        svix.message_attempt.list_by_msg(app.id, m.id)
    svix.message_attempt.list_by_endpoint(app.id, ep.id)
    svix.message_attempt.resend(app.id, msgs[0].id, ep.id)
    task = svix.endpoint.recover(app.id, ep.id, RecoverIn(since=_now() - timedelta(minutes=5)))
    assert task.status.value == "running"

    svix.endpoint.delete(app.id, ep.id)
    svix.application.delete(app.id)
    with pytest.raises(HttpError) as e:
        svix.application.get(app.id)
    assert _status(e) == 404


def test_app_portal_access_gives_a_token_for_that_application_only(svix, server, app, uniq):
    from svix.api import AppPortalAccessIn, ApplicationTokenExpireIn

    from conftest import make_client

    base_url, _ = server
    other = svix.application.create(ApplicationIn(name=f"other-{uniq}"))
    out = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(session_id="s1"))
    assert "#token=" in out.url and out.url.endswith(out.token)
    customer = make_client(base_url, out.token)
    # The token is a bearer credential for this application's API, as Svix's React hooks use it.
    created = customer.endpoint.create(app.id, EndpointIn(url="http://127.0.0.1:9/portal"))
    assert [e.id for e in customer.endpoint.list(app.id).data] == [created.id]
    with pytest.raises(HttpError) as e:
        customer.endpoint.list(other.id)
    assert _status(e) == 404
    with pytest.raises(HttpError) as e:
        customer.application.list()
    assert _status(e) == 404
    # Created with its application (Svix's `application`), then expired by session id.
    fresh = svix.authentication.app_portal_access(
        f"new-{uniq}", AppPortalAccessIn(application=ApplicationIn(name="New", uid=f"new-{uniq}"))
    )
    assert make_client(base_url, fresh.token).application.get(f"new-{uniq}").uid == f"new-{uniq}"
    svix.authentication.expire_all(app.id, ApplicationTokenExpireIn(session_ids=["s1"]))
    with pytest.raises(HttpError) as e:
        customer.endpoint.list(app.id)
    assert _status(e) == 401
    # Logout ends the token it is called with.
    second = make_client(base_url, svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token)
    second.authentication.logout()
    with pytest.raises(HttpError) as e:
        second.endpoint.list(app.id)
    assert _status(e) == 401


def test_integration_key_reaches_only_its_applications_messages(svix, server, app, uniq):
    from svix.api import IntegrationIn, IntegrationUpdate

    from conftest import make_client

    base_url, _ = server
    other = svix.application.create(ApplicationIn(name=f"integ-other-{uniq}"))
    integ = svix.integration.create(app.id, IntegrationIn(name="Zapier", feature_flags=["beta"]))
    assert integ.id.startswith("integ_") and integ.feature_flags == ["beta"]
    assert [i.id for i in svix.integration.list(app.id).data] == [integ.id]
    key = svix.integration.rotate_key(app.id, integ.id).key
    scoped = make_client(base_url, key)
    msg = scoped.message.create(app.id, MessageIn(event_type="py.integ", payload={}))
    assert scoped.message.get(app.id, msg.id).id == msg.id
    scoped.message_attempt.list_by_msg(app.id, msg.id)
    for call in (lambda: scoped.message.list(other.id), lambda: scoped.endpoint.list(app.id),
                 lambda: scoped.application.list()):
        with pytest.raises(HttpError) as e:
            call()
        assert _status(e) == 403
    renamed = svix.integration.update(app.id, integ.id, IntegrationUpdate(name="Make"))
    assert renamed.name == "Make"
    svix.integration.rotate_key(app.id, integ.id)
    with pytest.raises(HttpError) as e:
        scoped.message.list(app.id)
    assert _status(e) == 401
    svix.integration.delete(app.id, integ.id)
    with pytest.raises(HttpError) as e:
        svix.integration.get(app.id, integ.id)
    assert _status(e) == 404


def test_statistics_are_background_tasks_with_svixs_data(svix, app, base_port, uniq):
    from svix.api import AppUsageStatsIn

    _endpoint(svix, app, base_port, uniq)
    svix.message.create(app.id, MessageIn(event_type="py.stats", payload={}))
    started = svix.statistics.aggregate_app_stats(
        AppUsageStatsIn(since=_now() - timedelta(minutes=1), until=_now() + timedelta(minutes=1),
                        app_ids=[app.id, f"nope-{uniq}"])
    )
    assert started.unresolved_app_ids == [f"nope-{uniq}"]
    deadline = time.monotonic() + 10
    while (task := svix.background_task.get(started.id)).status.value == "running":
        assert time.monotonic() < deadline, "the statistics task never finished"
        time.sleep(0.05)
    assert task.status.value == "finished" and task.task.value == "application.stats"
    assert task.data["appStats"] == [{"appId": app.id, "appUid": app.uid, "messageDestinations": 1}]
    types = svix.statistics.aggregate_event_types()
    assert types.task.value == "event-type.aggregate"


def test_ingest_sources_and_their_endpoints(svix, base_port, uniq):
    from svix.api import IngestEndpointIn, IngestSourceIn
    from svix.models import SlackConfig

    created = svix.ingest.source.create(IngestSourceIn(
        name=f"Slack {uniq}", uid=f"slack-{uniq}", type="slack",
        config=SlackConfig(secret="8f742231b10e8888abcd99yyyzzz85a5"),
    ))
    # The ingest URL carries the source's secret token: /in/{id}/{token}.
    assert created.id.startswith("src_") and f"/in/{created.id}/" in created.ingest_url
    assert svix.ingest.source.get(f"slack-{uniq}").id == created.id
    ep = svix.ingest.endpoint.create(created.id, IngestEndpointIn(url=f"http://127.0.0.1:{base_port}/in/{uniq}"))
    assert [e.id for e in svix.ingest.endpoint.list(created.id).data] == [ep.id]
    svix.ingest.source.delete(created.id)
    with pytest.raises(HttpError) as e:
        svix.ingest.source.get(created.id)
    assert _status(e) == 404


# --- parameters the Python SDK sends, each with its effect ----------------------------------


def test_attempts_by_endpoint_embed_their_message_and_filter_on_it(svix, app, receiver, uniq):
    ep = svix.endpoint.create(app.id, EndpointIn(url=f"{receiver.url}/withmsg/{uniq}"))
    on = svix.message.create(app.id, MessageIn(event_type="wm.on", payload={"k": 1}, channels=["wm"]))
    off = svix.message.create(app.id, MessageIn(event_type="wm.off", payload={"k": 2}))
    receiver.wait_for(f"/withmsg/{uniq}", 2)
    opts = MessageAttemptListByEndpointOptions
    deadline = time.monotonic() + 10
    while True:
        got = svix.message_attempt.list_by_endpoint(app.id, ep.id, opts(with_msg=True)).data
        if len(got) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert {a.msg.id for a in got} == {on.id, off.id}
    assert all(a.msg.payload == {} for a in got), "an embedded message carries no payload"
    for matching in (opts(channel="wm"), opts(event_types=["wm.on"])):
        assert [a.msg_id for a in svix.message_attempt.list_by_endpoint(app.id, ep.id, matching).data] == [on.id]


def test_deliver_at_reads_back_on_create_and_get(svix, app):
    at = (_now() + timedelta(minutes=5)).replace(microsecond=0)
    msg = svix.message.create(app.id, MessageIn(event_type="da.x", payload={}, deliver_at=at))
    assert msg.deliver_at == at
    assert svix.message.get(app.id, msg.id).deliver_at == at
    now = svix.message.create(app.id, MessageIn(event_type="da.x", payload={}))
    assert now.deliver_at is None


def test_endpoint_stats_window(svix, app, base_port, uniq):
    from svix.api.endpoint import EndpointGetStatsOptions

    ep = _endpoint(svix, app, base_port, uniq)
    svix.message.create(app.id, MessageIn(event_type="st.x", payload={}))
    now = _now()
    inside = svix.endpoint.get_stats(
        app.id, ep.id, EndpointGetStatsOptions(since=now - timedelta(minutes=1), until=now + timedelta(seconds=5))
    )
    assert _deliveries(inside) == 1
    before = svix.endpoint.get_stats(app.id, ep.id, EndpointGetStatsOptions(until=now - timedelta(minutes=1)))
    assert _deliveries(before) == 0
    with pytest.raises(HTTPValidationError):
        svix.endpoint.get_stats(
            app.id, ep.id, EndpointGetStatsOptions(since=now, until=now - timedelta(minutes=1))
        )


def test_event_type_expunge_and_restore(svix, uniq):
    from svix.api.event_type import EventTypeDeleteOptions

    name = f"ex.{uniq}"
    svix.event_type.create(EventTypeIn(name=name, description="one"))
    svix.event_type.delete(name)
    restored = svix.event_type.create(EventTypeIn(name=name, description="two"))
    assert (restored.archived, restored.description) == (False, "two")
    with pytest.raises(HttpError) as e:
        svix.event_type.create(EventTypeIn(name=name, description="three"))
    assert _status(e) == 409
    svix.event_type.delete(name, EventTypeDeleteOptions(expunge=True))
    with pytest.raises(HttpError) as e:
        svix.event_type.get(name)
    assert _status(e) == 404
