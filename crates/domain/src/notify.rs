//! Texts hookd sends to tenants.

/// The email telling a tenant that an endpoint was disabled: `(subject, plain-text body)`.
/// `public_url` is where hookd is reached (its dashboard and API), without a trailing slash.
pub fn render_endpoint_disabled(
    endpoint_url: &str,
    endpoint_id: &str,
    app_id: &str,
    reason: &str,
    public_url: &str,
) -> (String, String) {
    let base = public_url.trim_end_matches('/');
    let subject = format!("hookd: endpoint disabled \u{2014} {endpoint_url}");
    let body = format!(
        "hookd has disabled one of your webhook endpoints. Nothing is delivered to it
until it is re-enabled.

Endpoint:    {endpoint_url}
Endpoint id: {endpoint_id}
Application: {app_id}
Reason:      {reason}

See it in the dashboard:
{base}/app/{app_id}/endpoint/{endpoint_id}

To re-enable it once the receiver works again, use the dashboard, or the API:

PATCH {base}/api/v1/app/{app_id}/endpoint/{endpoint_id}
{{\"disabled\": false}}

Re-enabling resets the endpoint's health.
"
    );
    (subject, body)
}
