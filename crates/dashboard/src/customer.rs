//! The portal's errors in its reader's words. The service's refusals are written for the
//! tenant's developers and operators (field names, API paths, settings); a tenant's customer
//! reads them in the portal, where they name none of those. Known refusals get a sentence of
//! their own; anything else that still names a setting, a path, an environment variable or a
//! parser's words becomes a plain "not accepted" for its field.

/// `line` ("Label: what is wrong", or a sentence) as the portal shows it.
pub fn words(line: &str) -> String {
    let (label, text) = match line.split_once(": ") {
        Some((label, text)) if is_label(label) => (Some(label), text),
        _ => (None, line),
    };
    let with_label = |s: String| match label {
        Some(l) => format!("{l}: {s}"),
        None => s,
    };
    if let Some(names) = unknown_event_types(text) {
        return with_label(format!(
            "{names} {} not offered here. Check event types from the list, or choose All \
             event types.",
            if names.contains(',') { "are" } else { "is" }
        ));
    }
    if text.contains("destination ") && text.contains("granted") {
        return with_label(
            "this address is on a private or internal network, where webhooks are not sent. \
             Use an address on the public internet."
                .to_owned(),
        );
    }
    if label == Some("Retry policy") {
        return with_label(
            "this is not a retry schedule we can use. Write a list of waits, like \
             {\"delays\": [\"5s\", \"1m\", \"1h\"]}, or a doubling wait with a ceiling, like \
             {\"exponential\": {\"base\": \"1s\", \"cap\": \"1h\"}}; or leave it empty for the \
             default schedule."
                .to_owned(),
        );
    }
    // The URL's own messages start with the field's name ("url must start with https://").
    let text = match (label, text.strip_prefix("url ")) {
        (Some("URL"), Some(rest)) => format!("the address {rest}"),
        _ => text.to_owned(),
    };
    if speaks_operator(&text) {
        return with_label("this value is not accepted. Check it and try again.".to_owned());
    }
    with_label(text)
}

/// A form label: a few capitalised words ("Max concurrency"), not the start of a sentence.
fn is_label(s: &str) -> bool {
    s.len() <= 32
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphabetic() || c == ' ')
}

/// The names in the service's "these event types do not exist: a, b; create them first …".
fn unknown_event_types(text: &str) -> Option<&str> {
    let rest = text.split_once("event types do not exist: ")?.1;
    Some(rest.split(';').next().unwrap_or(rest).trim())
}

/// Whether `text` names what only an operator or a developer knows: an environment variable,
/// an API path, a JSON field name (camelCase), a code span, or a parser's own words.
pub fn speaks_operator(text: &str) -> bool {
    const PARSER_WORDS: [&str; 6] = [
        "missing field",
        "unknown field",
        "unknown variant",
        "invalid type",
        "serde",
        "at line ",
    ];
    let lower = text.to_ascii_lowercase();
    if text.contains("HOOKD_")
        || lower.contains("/api/")
        || text.contains('`')
        || PARSER_WORDS.iter().any(|w| lower.contains(w))
    {
        return true;
    }
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| is_camel_case(w) || is_env_name(w))
}

/// `retryPolicy`, `maxConcurrency`: lowercase, then an uppercase letter inside.
fn is_camel_case(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_lowercase())
        && w.chars().any(|c| c.is_ascii_uppercase())
        && w.chars().all(|c| c.is_ascii_alphanumeric())
}

/// `SOME_SETTING`: capitals with an underscore inside.
fn is_env_name(w: &str) -> bool {
    w.len() > 3
        && w.contains('_')
        && w.chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::endpoint_url::ForbiddenDestination;

    #[test]
    fn operator_language_becomes_the_customers() {
        let ssrf = ForbiddenDestination {
            ip: "10.0.0.5".parse().unwrap(),
            reason: "a private address",
        };
        let shown = words(&format!("URL: {ssrf}."));
        assert!(
            shown.starts_with("URL: this address is on a private"),
            "{shown}"
        );

        let shown = words(
            "Event types: these event types do not exist: a.b, c.d; create them first (POST \
             /api/v1/event-type).",
        );
        assert_eq!(
            shown,
            "Event types: a.b, c.d are not offered here. Check event types from the list, or \
             choose All event types."
        );
        let shown = words("Retry policy: invalid retryPolicy: missing field `cap`.");
        assert!(
            shown.starts_with("Retry policy: this is not a retry schedule"),
            "{shown}"
        );
        assert!(!speaks_operator(&shown), "{shown}");

        assert_eq!(
            words("URL: url must start with https:// (plain http is disabled on this server)."),
            "URL: the address must start with https:// (plain http is disabled on this server)."
        );
        assert_eq!(
            words("Timeout: maxConcurrency must be between 1 and 1000."),
            "Timeout: this value is not accepted. Check it and try again."
        );
        assert_eq!(
            words("allow it with HOOKD_ENDPOINT_ALLOW_NETWORKS"),
            "this value is not accepted. Check it and try again."
        );
        // Plain sentences pass as they are.
        let plain = "Max concurrency: enter a whole number from 1 to 1000.";
        assert_eq!(words(plain), plain);
    }
}
