//! Which endpoints a message fans out to.

/// An endpoint receives a message when its event-type filter (if any) names the message's type
/// and, if the endpoint listens on channels, the message carries at least one of them.
/// Messages with channels still reach endpoints that have no channel filter (Svix semantics).
pub fn endpoint_matches(
    filter_types: Option<&[String]>,
    endpoint_channels: Option<&[String]>,
    event_type: &str,
    message_channels: &[String],
) -> bool {
    let type_ok = filter_types.is_none_or(|types| types.iter().any(|t| t == event_type));
    let channel_ok =
        endpoint_channels.is_none_or(|chans| message_channels.iter().any(|c| chans.contains(c)));
    type_ok && channel_ok
}

#[cfg(test)]
mod tests {
    use super::endpoint_matches;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_filters_match_everything() {
        assert!(endpoint_matches(None, None, "user.created", &[]));
        assert!(endpoint_matches(None, None, "user.created", &v(&["eu"])));
    }

    #[test]
    fn event_type_filter() {
        let types = v(&["user.created", "user.deleted"]);
        assert!(endpoint_matches(Some(&types), None, "user.created", &[]));
        assert!(!endpoint_matches(Some(&types), None, "invoice.paid", &[]));
        assert!(!endpoint_matches(Some(&[]), None, "user.created", &[]));
    }

    #[test]
    fn channel_filter_needs_a_shared_channel() {
        let chans = v(&["eu", "us"]);
        assert!(endpoint_matches(None, Some(&chans), "x", &v(&["us"])));
        assert!(!endpoint_matches(None, Some(&chans), "x", &v(&["apac"])));
        assert!(!endpoint_matches(None, Some(&chans), "x", &[]));
    }

    #[test]
    fn both_filters_must_pass() {
        let types = v(&["a"]);
        let chans = v(&["eu"]);
        assert!(endpoint_matches(
            Some(&types),
            Some(&chans),
            "a",
            &v(&["eu"])
        ));
        assert!(!endpoint_matches(
            Some(&types),
            Some(&chans),
            "b",
            &v(&["eu"])
        ));
        assert!(!endpoint_matches(
            Some(&types),
            Some(&chans),
            "a",
            &v(&["us"])
        ));
    }
}
