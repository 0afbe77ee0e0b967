"""Svix's Ingest API through the official Python SDK, unmodified: a GitHub source with its
endpoint, a signed GitHub webhook at the source's `ingestUrl` forwarded to the endpoint and
verified there with the SDK's own `Webhook`, the URL token rotated (the old URL answers 404 at
once), list, get by uid, upsert, and delete."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse

import httpx
import pytest
from svix.api import GithubConfig, IngestEndpointIn, IngestSourceIn
from svix.exceptions import HttpError
from svix.webhooks import Webhook


def local(base_url: str, ingest_url: str) -> str:
    """The ingest URL's path on the test's server (hookd's `public_url` is unset there)."""
    return base_url + urllib.parse.urlsplit(ingest_url).path


def github_post(url: str, secret: str, body: bytes, delivery: str) -> httpx.Response:
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return httpx.post(url, content=body, timeout=10, headers={
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": delivery,
        "x-hub-signature-256": f"sha256={signature}",
    })


def test_an_ingest_source_forwards_a_signed_webhook_and_rotates_its_url(
    server, svix, receiver, base_port, uniq
):
    base_url, _ = server
    secret = f"gh-secret-{uniq}"
    source = svix.ingest.source.create(IngestSourceIn(
        name=f"GitHub {uniq}", uid=f"gh-{uniq}", type="github",
        config=GithubConfig(secret=secret)))
    try:
        assert source.type == "github" and source.ingest_url
        assert source.id in [s.id for s in svix.ingest.source.list().data]
        assert svix.ingest.source.get(f"gh-{uniq}").id == source.id

        endpoint = svix.ingest.endpoint.create(
            source.id, IngestEndpointIn(url=f"http://127.0.0.1:{base_port}/ingest/{uniq}"))
        key = svix.ingest.endpoint.get_secret(source.id, endpoint.id).key

        body = json.dumps({"ref": "refs/heads/main", "n": uniq}).encode()
        r = github_post(local(base_url, source.ingest_url), secret, body, f"d1-{uniq}")
        assert r.status_code in (200, 202, 204), r.text
        got = receiver.wait_for(f"/ingest/{uniq}")
        assert len(got) == 1, "the forwarded webhook did not arrive"
        Webhook(key).verify(got[0]["body"], got[0]["headers"])  # raises if the signature is wrong
        assert json.loads(got[0]["body"])["n"] == uniq

        # A forged signature is refused and nothing more is forwarded.
        r = github_post(local(base_url, source.ingest_url), "wrong", body, f"d2-{uniq}")
        assert r.status_code == 401, r.text

        # Rotating the token: the new URL works, the old one is gone at once.
        # (A new body: a GitHub signature has no time, so hookd takes a signed body once.)
        body = json.dumps({"ref": "refs/heads/next", "n": uniq}).encode()
        rotated = svix.ingest.source.rotate_token(source.id)
        assert rotated.ingest_url != source.ingest_url
        old = github_post(local(base_url, source.ingest_url), secret, body, f"d3-{uniq}")
        assert old.status_code == 404, old.text
        new = github_post(local(base_url, rotated.ingest_url), secret, body, f"d4-{uniq}")
        assert new.status_code in (200, 202, 204), new.text
        assert len(receiver.wait_for(f"/ingest/{uniq}", 2)) == 2

        renamed = svix.ingest.source.upsert(source.id, IngestSourceIn(
            name="renamed", uid=f"gh-{uniq}", type="github", config=GithubConfig(secret=secret)))
        assert renamed.name == "renamed" and renamed.id == source.id
    finally:
        svix.ingest.source.delete(source.id)
    with pytest.raises(HttpError) as gone:
        svix.ingest.source.get(source.id)
    assert gone.value.status_code == 404
