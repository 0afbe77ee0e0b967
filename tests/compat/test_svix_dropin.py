"""What a team migrating from Svix hits first (issue 16): each test is one thing that used to
fail against hookd and works against Svix, checked through the official Python SDK where the
SDK has the call, and with plain HTTP where only load balancers or receivers see it."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from svix.api import (
    ApplicationIn,
    BackgroundTaskListOptions,
    EndpointIn,
    EndpointPatch,
    EventTypeIn,
    EventExampleIn,
    EventTypeListOptions,
    MessageAttemptListByMsgOptions,
    MessageGetOptions,
    MessageIn,
    RecoverIn,
)
from svix.api.application import ApplicationListOptions
from svix.exceptions import HttpError, HTTPValidationError


# --- health probes (item 8) -----------------------------------------------------------------


def test_health_answers_head_and_ping_as_svix_does(server):
    base_url, _ = server
    r = httpx.head(f"{base_url}/api/v1/health")
    assert r.status_code == 200, r.text
    assert r.content == b""
    for method in ("GET", "HEAD"):
        r = httpx.request(method, f"{base_url}/api/v1/health/ping")
        assert r.status_code == 204, (method, r.status_code, r.text)


# --- prevIterator on lists (item 7) ---------------------------------------------------------


def test_prev_iterator_leads_back_to_the_previous_page(svix, uniq):
    for i in range(5):
        svix.application.create(ApplicationIn(name=f"page-{uniq}-{i}"))
    first = svix.application.list(ApplicationListOptions(limit=2))
    second = svix.application.list(ApplicationListOptions(limit=2, iterator=first.iterator))
    assert second.prev_iterator, "every non-empty page has a prevIterator"
    back = svix.application.list(ApplicationListOptions(limit=2, iterator=second.prev_iterator))
    assert [a.id for a in back.data] == [a.id for a in first.data]
    assert back.done, "nothing comes before the first page"


# --- status codes (item 11) -----------------------------------------------------------------


def test_creating_a_message_answers_202_as_svix_does(server, app):
    base_url, key = server
    r = httpx.post(
        f"{base_url}/api/v1/app/{app.id}/msg",
        headers={"Authorization": f"Bearer {key}"},
        json={"eventType": "status.check", "payload": {}},
    )
    assert r.status_code == 202, r.text
    assert r.json()["id"].startswith("msg_")


# --- implicit application creation (item 3) -------------------------------------------------


def test_a_message_can_create_its_application(svix, uniq):
    uid = f"implicit-{uniq}"
    msg = svix.message.create(
        uid,
        MessageIn(
            event_type="user.created",
            payload={"n": 1},
            application=ApplicationIn(name="Implicit", uid=uid),
        ),
    )
    app = svix.application.get(uid)
    assert (app.name, app.uid) == ("Implicit", uid)
    got = svix.message.get(uid, msg.id, MessageGetOptions(with_content=True))
    assert got.payload == {"n": 1}
    # Once it exists, the body's application is ignored and the same app is used.
    again = svix.message.create(
        uid,
        MessageIn(event_type="user.created", payload={}, application=ApplicationIn(name="Other", uid=uid)),
    )
    assert svix.message.get(app.id, again.id).id == again.id
    assert svix.application.get(uid).name == "Implicit"


def test_implicit_creation_needs_the_paths_uid(svix, uniq):
    for application in (ApplicationIn(name="x"), ApplicationIn(name="x", uid=f"other-{uniq}")):
        with pytest.raises(HTTPValidationError) as e:
            svix.message.create(
                f"missing-{uniq}",
                MessageIn(event_type="e", payload={}, application=application),
            )
        assert e.value.detail[0].loc == ["body", "application", "uid"]


# --- input checks Svix makes (item 10) ------------------------------------------------------


def test_an_endpoint_cannot_filter_on_an_event_type_that_does_not_exist(svix, app, uniq):
    with pytest.raises(HTTPValidationError) as e:
        svix.endpoint.create(
            app.id, EndpointIn(url="http://127.0.0.1:9/x", event_types=[f"nope.{uniq}"])
        )
    assert e.value.detail[0].loc == ["body", "filterTypes"]
    assert f"nope.{uniq}" in e.value.detail[0].msg
    svix.event_type.create(EventTypeIn(name=f"yes.{uniq}", description="d"))
    ep = svix.endpoint.create(
        app.id, EndpointIn(url="http://127.0.0.1:9/x", event_types=[f"yes.{uniq}"])
    )
    with pytest.raises(HTTPValidationError):
        svix.endpoint.patch(app.id, ep.id, EndpointPatch(event_types=[f"yes.{uniq}", f"no.{uniq}"]))
    # An archived type is gone for new filters, but an endpoint keeps the ones it had.
    svix.event_type.delete(f"yes.{uniq}")
    svix.endpoint.patch(app.id, ep.id, EndpointPatch(description="still fine"))
    with pytest.raises(HTTPValidationError):
        svix.endpoint.create(app.id, EndpointIn(url="http://127.0.0.1:9/y", event_types=[f"yes.{uniq}"]))


def test_event_type_schemas_must_be_json_schema_objects(svix, uniq):
    for bad in ({"1": "not a schema"}, {"1": 5}, {"1": {"type": "object"}, "2": []}):
        with pytest.raises(HTTPValidationError) as e:
            svix.event_type.create(EventTypeIn(name=f"s.{uniq}", description="d", schemas=bad))
        assert e.value.detail[0].loc == ["body", "schemas"]
    good = {"1": {"type": "object", "properties": {"id": {"type": "string"}}}}
    et = svix.event_type.create(EventTypeIn(name=f"s.{uniq}", description="d", schemas=good))
    assert et.schemas == good


# --- documented filters are honoured or refused, never ignored (item 9) ---------------------


def _attempts_for_both(svix, app, eps, msg_id, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = svix.message_attempt.list_by_msg(app.id, msg_id).data
        if {a.endpoint_id for a in got} >= {e.id for e in eps}:
            return got
        time.sleep(0.05)
    raise AssertionError("no attempt to every endpoint")


def test_attempts_of_a_message_filter_by_endpoint_channel_tag_and_type(svix, app, base_port, uniq):
    eps = [
        svix.endpoint.create(app.id, EndpointIn(url=f"http://127.0.0.1:{base_port}/f/{uniq}/{i}"))
        for i in range(2)
    ]
    msg = svix.message.create(
        app.id, MessageIn(event_type="f.e", payload={}, channels=["c1"], tags=["t1"])
    )
    _attempts_for_both(svix, app, eps, msg.id)
    only = svix.message_attempt.list_by_msg(
        app.id, msg.id, MessageAttemptListByMsgOptions(endpoint_id=eps[0].id)
    ).data
    assert only and {a.endpoint_id for a in only} == {eps[0].id}
    opts = MessageAttemptListByMsgOptions
    for matching in (opts(channel="c1"), opts(tag="t1"), opts(event_types=["x.y", "f.e"])):
        assert len(svix.message_attempt.list_by_msg(app.id, msg.id, matching).data) >= 2
    for other in (opts(channel="c2"), opts(tag="t2"), opts(event_types=["x.y"])):
        assert svix.message_attempt.list_by_msg(app.id, msg.id, other).data == []


def _three_labelled_messages(server, app, receiver, uniq):
    """An endpoint and three messages delivered to it: types t.a, t.b, t.c."""
    base_url, key = server
    auth = {"Authorization": f"Bearer {key}"}
    ep = httpx.post(
        f"{base_url}/api/v1/app/{app.id}/endpoint", headers=auth,
        json={"url": f"http://127.0.0.1:{receiver.port}/forms/{uniq}"},
    ).json()["id"]
    ids = {}
    for t in ("t.a", "t.b", "t.c"):
        r = httpx.post(
            f"{base_url}/api/v1/app/{app.id}/msg", headers=auth, json={"eventType": t, "payload": {}}
        )
        assert r.status_code == 202, r.text
        ids[t] = r.json()["id"]
    receiver.wait_for(f"/forms/{uniq}", 3)
    return auth, ep, ids


def test_event_types_is_read_in_every_form_svix_takes(server, app, receiver, uniq):
    base_url, _ = server
    auth, ep, ids = _three_labelled_messages(server, app, receiver, uniq)
    want = sorted([ids["t.a"], ids["t.c"]])
    forms = [
        "event_types=t.a,t.c",
        "event_types=t.a&event_types=t.c",
        "event_types[]=t.a&event_types[]=t.c",
        "event_types%5B%5D=t.a&event_types%5B%5D=t.c",
    ]
    lists = {
        f"/app/{app.id}/msg": "id",
        f"/app/{app.id}/endpoint/{ep}/msg": "id",
        f"/app/{app.id}/attempt/endpoint/{ep}": "msgId",
    }
    for path, key in lists.items():
        deadline = time.monotonic() + 10
        for form in forms:
            while True:
                r = httpx.get(f"{base_url}/api/v1{path}?{form}", headers=auth)
                assert r.status_code == 200, (path, form, r.text)
                got = sorted({item[key] for item in r.json()["data"]})
                if got == want or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert got == want, (path, form, got)
    r = httpx.get(f"{base_url}/api/v1/app/{app.id}/msg?event_types=bad%20name", headers=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "event_types"], r.text


def test_oauth_extra_params_read_back_as_an_object(server, app):
    base_url, key = server
    auth = {"Authorization": f"Bearer {key}"}
    ep = httpx.post(
        f"{base_url}/api/v1/app/{app.id}/endpoint", headers=auth, json={"url": "http://127.0.0.1:9/o"}
    ).json()["id"]
    path = f"{base_url}/api/v1/app/{app.id}/endpoint/{ep}/oauth"
    r = httpx.put(path, headers=auth, json={
        "grantType": "clientCredentials", "authMethod": "clientSecretPost",
        "tokenUrl": "http://127.0.0.1:9/token", "clientId": "c", "clientSecret": "s",
        "extraParams": {"audience": "https://api.example"},
    })
    assert r.status_code == 204, r.text
    got = httpx.get(path, headers=auth).json()
    assert got["extraParams"] == {"audience": "https://api.example"}, got
    assert "clientSecret" not in got


def test_background_tasks_filter_by_kind_and_status(svix, app, base_port, uniq):
    ep = svix.endpoint.create(app.id, EndpointIn(url=f"http://127.0.0.1:{base_port}/t/{uniq}"))
    task = svix.endpoint.recover(
        app.id, ep.id, RecoverIn(since=datetime.now(timezone.utc) - timedelta(hours=1))
    )
    recovers = svix.background_task.list(BackgroundTaskListOptions(task="endpoint.recover"))
    assert task.id in [t.id for t in recovers.data]
    replays = svix.background_task.list(BackgroundTaskListOptions(task="endpoint.replay"))
    assert task.id not in [t.id for t in replays.data]
    assert all(t.task == "endpoint.replay" for t in replays.data)
    failed = svix.background_task.list(BackgroundTaskListOptions(status="failed"))
    assert task.id not in [t.id for t in failed.data]


def test_event_types_leave_out_schemas_when_asked(svix, uniq):
    schema = {"1": {"type": "object"}}
    svix.event_type.create(EventTypeIn(name=f"wc.{uniq}", description="d", schemas=schema))
    def find(opts):
        page = svix.event_type.list(opts)
        return next(e for e in page.data if e.name == f"wc.{uniq}")
    assert find(EventTypeListOptions(limit=250, with_content=True)).schemas == schema
    assert find(EventTypeListOptions(limit=250, with_content=False)).schemas is None


# --- svix-* signature headers (item 1) ------------------------------------------------------


def test_deliveries_carry_svix_headers_that_svixs_own_verifier_accepts(server, svix, app, receiver, uniq):
    from standardwebhooks.exceptions import WebhookVerificationError
    from svix.webhooks import Webhook

    base_url, key = server
    auth = {"Authorization": f"Bearer {key}"}
    eps = {}
    for choice in ("default", "webhook", "svix"):
        body = {"url": f"{receiver.url}/sig/{uniq}/{choice}"}
        if choice != "default":
            body["signatureHeaders"] = choice
        r = httpx.post(f"{base_url}/api/v1/app/{app.id}/endpoint", headers=auth, json=body)
        assert r.status_code == 201, r.text
        assert r.json()["signatureHeaders"] == (None if choice == "default" else choice)
        eps[choice] = r.json()["id"]
    svix.message.create(app.id, MessageIn(event_type="sig.check", payload={"n": 1}))
    got = {c: receiver.wait_for(f"/sig/{uniq}/{c}") for c in eps}
    for choice, reqs in got.items():
        assert reqs, f"nothing reached the {choice} endpoint"
    # The server default sends both sets with the same values; Svix's verifier, given only the
    # svix-* headers, accepts the delivery.
    h = got["default"][0]["headers"]
    for name in ("id", "timestamp", "signature"):
        assert h[f"svix-{name}"] == h[f"webhook-{name}"]
    secret = svix.endpoint.get_secret(app.id, eps["default"]).key
    svix_only = {k: v for k, v in h.items() if k.startswith("svix-")}
    Webhook(secret).verify(got["default"][0]["body"], svix_only)  # raises if it does not verify
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"n":2}', svix_only)
    assert not any(k.startswith("svix-") for k in got["webhook"][0]["headers"])
    assert not any(k.startswith("webhook-") and k != "webhook-attempt" for k in got["svix"][0]["headers"])
    # An endpoint's choice is changed, and cleared back to the server's, by PATCH.
    r = httpx.patch(
        f"{base_url}/api/v1/app/{app.id}/endpoint/{eps['svix']}", headers=auth,
        json={"signatureHeaders": None},
    )
    assert r.status_code == 200 and r.json()["signatureHeaders"] is None, r.text
    r = httpx.patch(
        f"{base_url}/api/v1/app/{app.id}/endpoint/{eps['svix']}", headers=auth,
        json={"signatureHeaders": "stripe"},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "signatureHeaders"], r.text


# --- send-example and attempted destinations (item 6) ---------------------------------------


def test_send_example_reaches_only_that_endpoint_with_the_schemas_example(svix, app, receiver, uniq):
    schema = {"1": {"type": "object", "examples": [{"first": 1}, {"second": 2}]}}
    svix.event_type.create(EventTypeIn(name=f"ex.{uniq}", description="d", schemas=schema))
    svix.event_type.create(EventTypeIn(name=f"bare.{uniq}", description="d"))
    target, other = (
        svix.endpoint.create(app.id, EndpointIn(url=f"{receiver.url}/ex/{uniq}/{n}"))
        for n in ("target", "other")
    )
    msg = svix.endpoint.send_example(
        app.id, target.id, EventExampleIn(event_type=f"ex.{uniq}", example_index=1)
    )
    assert msg.event_type == f"ex.{uniq}"
    got = receiver.wait_for(f"/ex/{uniq}/target")
    assert got and json.loads(got[0]["body"]) == {"second": 2}
    ping = svix.endpoint.send_example(app.id, target.id, EventExampleIn(event_type="svix.ping"))
    got = receiver.wait_for(f"/ex/{uniq}/target", count=2)
    assert json.loads(got[1]["body"]) == {"success": True}
    assert ping.id != msg.id
    time.sleep(0.3)
    assert receiver.received(f"/ex/{uniq}/other") == [], "an example goes to its endpoint only"
    # The message is stored and listed like any other, and its only destination is the target.
    dests = svix.message_attempt.list_attempted_destinations(app.id, msg.id)
    assert [d.id for d in dests.data] == [target.id]
    assert dests.data[0].url == target.url
    with pytest.raises(HttpError) as e:
        svix.endpoint.send_example(app.id, target.id, EventExampleIn(event_type=f"bare.{uniq}"))
    assert e.value.status_code == 400
    with pytest.raises(HttpError) as e:
        svix.endpoint.send_example(app.id, target.id, EventExampleIn(event_type=f"missing.{uniq}"))
    assert e.value.status_code == 404


def test_attempted_destinations_list_every_endpoint_with_its_delivery_state(svix, app, receiver, uniq):
    eps = [
        svix.endpoint.create(app.id, EndpointIn(url=f"{receiver.url}/d/{uniq}/{i}"))
        for i in range(3)
    ]
    msg = svix.message.create(app.id, MessageIn(event_type="d.e", payload={}))
    for i in range(3):
        receiver.wait_for(f"/d/{uniq}/{i}")
    from svix.api import MessageAttemptListAttemptedDestinationsOptions as Opts

    first = svix.message_attempt.list_attempted_destinations(app.id, msg.id, Opts(limit=2))
    rest = svix.message_attempt.list_attempted_destinations(
        app.id, msg.id, Opts(limit=2, iterator=first.iterator)
    )
    ids = [d.id for d in first.data + rest.data]
    assert sorted(ids) == sorted(e.id for e in eps) and len(set(ids)) == 3
    assert rest.done


# --- scheduled delivery (item 4) ------------------------------------------------------------


def test_deliver_at_holds_a_message_until_its_time(server, svix, app, receiver, uniq):
    base_url, key = server
    auth = {"Authorization": f"Bearer {key}"}
    ep = svix.endpoint.create(app.id, EndpointIn(url=f"{receiver.url}/later/{uniq}"))
    at = datetime.now(timezone.utc) + timedelta(seconds=2)
    r = httpx.post(
        f"{base_url}/api/v1/app/{app.id}/msg", headers=auth,
        json={"eventType": "later.e", "payload": {"n": 1}, "deliverAt": at.isoformat()},
    )
    assert r.status_code == 202, r.text
    msg_id = r.json()["id"]
    time.sleep(1.0)
    assert receiver.received(f"/later/{uniq}") == [], "nothing before deliverAt"
    listed = httpx.get(f"{base_url}/api/v1/app/{app.id}/endpoint/{ep.id}/msg", headers=auth).json()
    assert [(m["id"], m["status"]) for m in listed["data"]] == [(msg_id, 1)], "listed as pending"
    got = receiver.wait_for(f"/later/{uniq}", timeout=10.0)
    assert got, "delivered once its time came"
    assert datetime.now(timezone.utc) >= at
    for bad, why in [
        ((datetime.now(timezone.utc) + timedelta(days=400)).isoformat(), "at most"),
        ("next tuesday", ""),
    ]:
        r = httpx.post(
            f"{base_url}/api/v1/app/{app.id}/msg", headers=auth,
            json={"eventType": "later.e", "payload": {}, "deliverAt": bad},
        )
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "deliverAt"] and why in r.text


# --- content expunge (item 5) ---------------------------------------------------------------


def test_expunging_content_keeps_metadata_and_stops_every_resend(svix, app, receiver, uniq):
    ep = svix.endpoint.create(app.id, EndpointIn(url=f"{receiver.url}/gone/{uniq}"))
    msg = svix.message.create(app.id, MessageIn(event_type="pii.e", payload={"ssn": "123"}))
    receiver.wait_for(f"/gone/{uniq}")
    attempts = _attempts_for_both(svix, app, [ep], msg.id)
    assert attempts[0].response == "{}"
    # One attempt's response body alone.
    svix.message_attempt.expunge_content(app.id, msg.id, attempts[0].id)
    again = svix.message_attempt.get(app.id, msg.id, attempts[0].id)
    assert again.response == "" and again.response_status_code == 200
    # The whole message: payload gone, metadata kept, never sent again.
    svix.message.expunge_content(app.id, msg.id)
    got = svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True))
    assert got.payload == {"expired": True}
    assert (got.id, got.event_type) == (msg.id, "pii.e")
    with pytest.raises(HttpError) as e:
        svix.message_attempt.resend(app.id, msg.id, ep.id)
    assert e.value.status_code == 409
    from svix.api import RecoverIn as Recover

    svix.endpoint.recover(app.id, ep.id, Recover(since=datetime.now(timezone.utc) - timedelta(hours=1)))
    time.sleep(0.5)
    assert len(receiver.received(f"/gone/{uniq}")) == 1, "nothing is sent again"


def test_a_retry_waiting_when_content_is_expunged_is_never_sent(server, svix, app, uniq):
    import conftest

    failing = conftest.Receiver(answer=lambda req: 500)
    try:
        base_url, key = server
        r = httpx.post(
            f"{base_url}/api/v1/app/{app.id}/endpoint",
            headers={"Authorization": f"Bearer {key}"},
            json={"url": f"{failing.url}/r/{uniq}", "retryPolicy": {"delays": ["1s"]}},
        )
        assert r.status_code == 201, r.text
        msg = svix.message.create(app.id, MessageIn(event_type="pii.e", payload={"a": 1}))
        assert failing.wait_for(f"/r/{uniq}"), "the first attempt"
        svix.message.expunge_content(app.id, msg.id)
        time.sleep(2.0)
        assert len(failing.received(f"/r/{uniq}")) == 1, "the pending retry was dropped"
    finally:
        failing.close()


def test_expanded_statuses_false_shows_a_skipped_delivery_as_svix_shows_a_canceled_one(server, app):
    base_url, key = server
    auth = {"Authorization": f"Bearer {key}"}
    api = f"{base_url}/api/v1/app/{app.id}"
    ep = httpx.post(f"{api}/endpoint", headers=auth, json={"url": "http://127.0.0.1:9/s"}).json()["id"]
    later = (datetime.now(timezone.utc) + timedelta(minutes=10)).isoformat()
    msg = httpx.post(
        f"{api}/msg", headers=auth, json={"eventType": "sk.x", "payload": {}, "deliverAt": later}
    ).json()["id"]
    r = httpx.post(f"{api}/msg/{msg}/endpoint/{ep}/skip", headers=auth)
    assert r.status_code == 202, r.text

    def status(params):
        r = httpx.get(f"{api}/endpoint/{ep}/msg", headers=auth, params=params)
        assert r.status_code == 200, r.text
        (m,) = r.json()["data"]
        return m["status"], m["statusText"]

    assert status({}) == (4, "canceled")
    assert status({"expanded_statuses": "true"}) == (4, "canceled")
    assert status({"expanded_statuses": "false"}) == (0, "success")
