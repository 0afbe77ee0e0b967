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

/// What the early-warning email says about an endpoint that keeps failing.
pub struct FailingEndpoint<'a> {
    pub endpoint_url: &'a str,
    pub endpoint_id: &'a str,
    pub app_id: &'a str,
    pub failing_since: crate::Timestamp,
    pub disable_at: crate::Timestamp,
    pub now: crate::Timestamp,
    /// The newest failed attempts, newest first.
    pub last_errors: &'a [crate::health::RecentError],
}

/// The early-warning email: an endpoint has been failing for a while and hookd will disable
/// it unless a delivery succeeds first. `(subject, plain-text body)`.
pub fn render_endpoint_failing(ep: &FailingEndpoint<'_>, public_url: &str) -> (String, String) {
    use crate::time::rfc3339;
    let base = public_url.trim_end_matches('/');
    let (url, id, app) = (ep.endpoint_url, ep.endpoint_id, ep.app_id);
    let left = crate::health::time_left(ep.disable_at.since(ep.now).max(std::time::Duration::ZERO));
    let subject = format!("hookd: endpoint failing \u{2014} {url}");
    let mut errors = String::new();
    for e in ep.last_errors {
        errors.push_str(&format!("  {}  {}\n", rfc3339::format(e.at), e.describe()));
    }
    if errors.is_empty() {
        errors.push_str("  (none kept)\n");
    }
    let body = format!(
        "One of your webhook endpoints has been failing with no successful delivery since
{since}. Unless a delivery to it succeeds first, hookd will disable it in {left}
(at {disable_at}); nothing is then delivered to it until it is re-enabled.

Endpoint:    {url}
Endpoint id: {id}
Application: {app}

Last errors:
{errors}
See it in the dashboard:
{base}/app/{app}/endpoint/{id}

This is the only warning about this failure streak. Choose who gets these emails in the
dashboard's Settings.
",
        since = rfc3339::format(ep.failing_since),
        disable_at = rfc3339::format(ep.disable_at),
    );
    (subject, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;
    use crate::health::RecentError;

    #[test]
    fn the_warning_says_since_when_the_errors_the_time_left_and_links_the_endpoint() {
        let errors = [
            RecentError {
                at: Timestamp::from_millis(90_000_000),
                status_code: Some(503),
                error_kind: None,
            },
            RecentError {
                at: Timestamp::from_millis(80_000_000),
                status_code: None,
                error_kind: Some("connect".into()),
            },
        ];
        let (subject, body) = render_endpoint_failing(
            &FailingEndpoint {
                endpoint_url: "https://rx.example.com/hook",
                endpoint_id: "ep_1",
                app_id: "app_1",
                failing_since: Timestamp::from_millis(0),
                disable_at: Timestamp::from_millis(5 * 86_400_000),
                now: Timestamp::from_millis(86_400_000 + 1_000),
                last_errors: &errors,
            },
            "https://hookd.example.com/",
        );
        assert_eq!(
            subject,
            "hookd: endpoint failing \u{2014} https://rx.example.com/hook"
        );
        for want in [
            "since\n1970-01-01T00:00:00.000Z",
            "in 3 days 23 hours",
            "(at 1970-01-06T00:00:00.000Z)",
            "1970-01-02T01:00:00.000Z  HTTP 503",
            "1970-01-01T22:13:20.000Z  connect",
            "https://hookd.example.com/app/app_1/endpoint/ep_1",
        ] {
            assert!(body.contains(want), "{want:?} in\n{body}");
        }
    }
}
