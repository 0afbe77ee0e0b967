//! Limits on a message payload's shape that protect every reader of it (the dispatcher, the
//! dashboard, the tenant's receivers): how deeply it may nest.

/// The deepest nesting of objects and arrays a payload may have. Real event payloads rarely
/// pass 10; 100,000 levels were accepted before this limit and made every page that showed
/// the payload indent each level.
pub const MAX_DEPTH: usize = 64;

/// Whether `text` nests no deeper than `limit`. Most payloads have fewer opening brackets in
/// all than the limit, which a count (a loop the compiler vectorises) shows without walking
/// the text byte by byte: on 64 KB payloads the walk alone cost ~8 % more server CPU.
pub fn depth_within(text: &[u8], limit: usize) -> bool {
    let opening = text.iter().filter(|&&b| b == b'{' || b == b'[').count();
    opening <= limit || json_depth(text) <= limit
}

/// The deepest nesting of `{` and `[` in JSON text, counted without recursion (so any input,
/// however deep, costs one pass and no stack). Brackets inside strings do not count.
pub fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Why bytes are not a JSON text: the first problem, as serde_json or the UTF-8 check names it
/// with its place (`trailing characters at line 1 column 9`).
pub fn json_problem(raw: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(raw) {
        Ok(text) => text,
        Err(e) => {
            return Some(format!(
                "not UTF-8: an invalid byte at offset {}",
                e.valid_up_to()
            ));
        }
    };
    // Parsed to the end without building a value: trailing text, bad escapes and raw control
    // characters in strings are all refused here (the UTF-8 check above is needed: serde_json
    // skips strings it only ignores without checking them).
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .err()
        .map(|e| format!("not JSON: {e}"))
}

/// A received body as a JSON text: whitespace around it (which JSON allows) is dropped, and
/// what is left must parse whole. Nesting past [`MAX_DEPTH`] is left to that rule's own check
/// and message (serde_json's own limit, 128 levels, would otherwise answer first).
pub fn json_body(raw: &[u8]) -> Result<&[u8], String> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = raw.iter().position(|b| !is_space(b)).unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |i| i + 1);
    let trimmed = &raw[start..end];
    if trimmed.is_empty() {
        return Err("the body is empty: a JSON object is expected".to_owned());
    }
    if !depth_within(trimmed, MAX_DEPTH) {
        return Ok(trimmed);
    }
    match json_problem(trimmed) {
        Some(problem) => Err(format!("the body is {problem}")),
        None => Ok(trimmed),
    }
}

/// A form body (`application/x-www-form-urlencoded`: Twilio's webhooks, Slack's commands) as a
/// JSON object of its parameters: each value a string, a name given more than once a list of
/// them in order. Every reader of a message expects JSON, so the form is kept this way.
pub fn form_as_json(raw: &[u8]) -> Result<Vec<u8>, String> {
    if std::str::from_utf8(raw).is_err() {
        return Err("the form body is not UTF-8".to_owned());
    }
    let mut out = serde_json::Map::new();
    for (k, v) in form_urlencoded::parse(raw) {
        let v = serde_json::Value::String(v.into_owned());
        match out.get_mut(k.as_ref()) {
            None => {
                out.insert(k.into_owned(), v);
            }
            Some(serde_json::Value::Array(list)) => list.push(v),
            Some(first) => {
                let first = first.take();
                out.insert(k.into_owned(), serde_json::Value::Array(vec![first, v]));
            }
        }
    }
    Ok(serde_json::to_vec(&out).expect("a map of strings serialises"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_must_be_whole_json_with_only_whitespace_around_it() {
        assert_eq!(json_body(b" \r\n\t{\"a\":1}\n "), Ok(&b"{\"a\":1}"[..]));
        assert_eq!(json_body(b"[1]"), Ok(&b"[1]"[..]));
        for (bad, says) in [
            (
                &b"{\"a\":\"\xff\xfe\"}"[..],
                "not UTF-8: an invalid byte at offset 6",
            ),
            (b"{\"a\":\"\x00\"}", "control character"),
            (b"{\"a\":1} x", "trailing characters at line 1 column 9"),
            (b"{\"a\":", "EOF while parsing"),
            (b"{\"a\":\"\\q\"}", "invalid escape"),
            (b"  ", "empty"),
        ] {
            let e = json_body(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert_eq!(json_problem(b"{\"a\":\"\\u0000\"}"), None);
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(json_depth(b"42"), 0);
        assert_eq!(json_depth(b"{}"), 1);
        assert_eq!(json_depth(br#"{"a":[1,{"b":[]}]}"#), 4);
        assert_eq!(json_depth(br#"{"a":"[[[{{{\"[["}"#), 1);
        assert_eq!(json_depth(br#"[{}, {}, [[]]]"#), 3);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(json_depth(deep.as_bytes()), 100_000);
        assert!(!depth_within(deep.as_bytes(), 64));
        // Many brackets, shallow: the count alone cannot tell, the walk does.
        let wide = format!("[{}]", vec!["[]"; 1000].join(","));
        assert!(depth_within(wide.as_bytes(), 2) && !depth_within(wide.as_bytes(), 1));
        assert!(depth_within(br#"{"a":"[[[[[[[["}"#, 1));
    }

    #[test]
    fn a_form_body_reads_as_an_object_of_strings_with_repeats_as_lists() {
        let json =
            super::form_as_json(b"To=%2B15551234&Body=Hi+there&Media=a&Media=b&Media=c").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"To": "+15551234", "Body": "Hi there", "Media": ["a", "b", "c"]})
        );
        assert_eq!(super::form_as_json(b"").unwrap(), b"{}");
        assert!(
            super::form_as_json(b"a=%FF").is_ok(),
            "percent-escapes are decoded lossily"
        );
        assert!(super::form_as_json(&[0xff, b'=', b'1']).is_err());
    }
}
