"""Svix's operational-webhook endpoint API through the official Python SDK, unmodified:
create, list, get, upsert, headers, secret get and rotate, delete; and an operational event
(`endpoint.created`) that reaches the endpoint verifies with the SDK's own `Webhook`."""

from __future__ import annotations

import json

import pytest
from svix.api import (
    EndpointIn,
    OperationalWebhookEndpointHeadersIn,
    OperationalWebhookEndpointIn,
    OperationalWebhookEndpointSecretIn,
    OperationalWebhookEndpointUpsertIn,
)
from svix.exceptions import HttpError, HTTPValidationError
from svix.webhooks import Webhook


def test_operational_endpoint_lifecycle(svix, app, receiver, base_port, uniq):
    ops = svix.operational_webhook.endpoint
    made = ops.create(
        OperationalWebhookEndpointIn(
            url=f"http://127.0.0.1:{base_port}/ops/{uniq}",
            uid=f"ops-{uniq}",
            description="alerts",
            event_types=["endpoint.created", "message.attempt.exhausted"],
            throttle_rate=5,
            metadata={"team": "payments"},
        )
    )
    try:
        assert made.id.startswith("ep_")
        assert made.event_types == ["endpoint.created", "message.attempt.exhausted"]
        assert made.throttle_rate == 5 and made.metadata == {"team": "payments"}
        assert made.id in [e.id for e in ops.list().data]
        assert ops.get(f"ops-{uniq}").id == made.id

        # Not one of the tenant's applications, nor reachable as one.
        assert all(a.name != "Operational webhooks" for a in svix.application.list().data)

        # An event it listens to arrives signed with its secret.
        secret = ops.get_secret(made.id).key
        svix.endpoint.create(app.id, EndpointIn(url=f"http://127.0.0.1:{base_port}/hook/{uniq}"))
        got = receiver.wait_for(f"/ops/{uniq}", timeout=10.0)
        if not got:
            pytest.skip("nothing delivered within 10 s: no dispatcher in this hookd build")
        Webhook(secret).verify(got[0]["body"], dict(got[0]["headers"]))
        event = json.loads(got[0]["body"])
        assert event["type"] == "endpoint.created"
        assert event["data"]["appId"] == app.id

        up = ops.upsert(
            made.id,
            OperationalWebhookEndpointUpsertIn(
                url=f"http://127.0.0.1:{base_port}/ops/{uniq}", description="renamed"
            ),
        )
        assert up.description == "renamed" and up.event_types is None

        ops.set_headers(made.id, OperationalWebhookEndpointHeadersIn(headers={"X-Team": "payments"}))
        assert ops.get_headers(made.id).headers == {"X-Team": "payments"}

        ops.rotate_secret(made.id, OperationalWebhookEndpointSecretIn())
        assert ops.get_secret(made.id).key != secret
    finally:
        ops.delete(made.id)
    with pytest.raises(HttpError) as e:
        ops.get(made.id)
    assert e.value.status_code == 404


def test_operational_endpoint_input_rules(svix, base_port, uniq):
    ops = svix.operational_webhook.endpoint
    with pytest.raises(HTTPValidationError):
        ops.create(
            OperationalWebhookEndpointIn(
                url=f"http://127.0.0.1:{base_port}/ops/{uniq}", event_types=["invoice.paid"]
            )
        )
    with pytest.raises(HTTPValidationError):
        ops.create(OperationalWebhookEndpointIn(url="http://10.1.2.3/ops"))
    with pytest.raises(HTTPValidationError):
        ops.create(OperationalWebhookEndpointIn(url=f"http://127.0.0.1:{base_port}/x", uid="no spaces"))
