"""Verifies requests hookd sent with the independent `standardwebhooks` package.

Reads JSON from stdin: {"secrets": ["whsec_..."], "requests": [{"headers": {...}, "body": "..."}]}
Each request must verify with at least one of the secrets. Prints a count; exits 1 on a failure.
"""
import json
import sys

from standardwebhooks import Webhook


def main() -> int:
    doc = json.load(sys.stdin)
    hooks = [Webhook(s) for s in doc["secrets"]]
    verified = 0
    for i, req in enumerate(doc["requests"]):
        ok = False
        errors = []
        for hook in hooks:
            try:
                hook.verify(req["body"], req["headers"])
                ok = True
                break
            except Exception as e:  # the package raises WebhookVerificationError
                errors.append(repr(e))
        if not ok:
            print(f"request {i} failed verification: {errors}", file=sys.stderr)
            return 1
        verified += 1
    print(f"verified {verified}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
