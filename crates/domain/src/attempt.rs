//! What an attempt page says: the headers kept with a try (bounded), and in plain words what
//! happened and what comes next.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::classify::{Classification, Outcome, StatusOverrides, StatusPreset, Verdict, classify};
use crate::delivery::{DeliveryState, ErrorKind};
use crate::signing::SignatureHeaders;

/// The most bytes of a response body kept with an attempt.
pub const BODY_KEPT_BYTES: usize = 1024;
/// The most bytes of header names and values kept with one attempt, per direction: about the
/// size of the body kept ([`BODY_KEPT_BYTES`]), so an attempt row stays a few KiB whatever a receiver
/// answers.
pub const HEADERS_KEPT_BYTES: usize = 2048;
/// The most bytes of one header value kept (a longer one is cut and ends with "…").
pub const HEADER_VALUE_KEPT_BYTES: usize = 512;

/// Headers as sent or received, in order, bounded by [`HEADERS_KEPT_BYTES`]; stored as text,
/// one header a line ([`HeaderList::to_stored`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderList {
    #[serde(rename = "h")]
    pub headers: Vec<(String, String)>,
    /// How many headers were left out once the budget was spent.
    #[serde(rename = "more", default, skip_serializing_if = "is_zero")]
    pub omitted: u32,
}

/// The signing headers of one attempt as kept: when the same id, timestamp and signature went
/// out under a second set of names (Svix's beside Standard Webhooks'), the second set is kept
/// as one line saying so. Measured: the copy was 175 of the ~410 bytes an attempt's headers
/// added to a stored message.
pub fn kept_sent_headers<'a>(
    sent: &'a [(&'a str, String)],
    sets: &[[&str; 3]],
) -> Vec<(&'a str, String)> {
    let [first, second] = sets else {
        return sent.iter().map(|(k, v)| (*k, v.clone())).collect();
    };
    let value_of = |name: &str| sent.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
    let repeated = second
        .iter()
        .zip(first.iter())
        .all(|(b, a)| value_of(b).is_some() && value_of(b) == value_of(a));
    if !repeated {
        return sent.iter().map(|(k, v)| (*k, v.clone())).collect();
    }
    let prefix = |set: &[&str; 3]| {
        let p = set[0].rsplit_once('-').map_or(set[0], |(p, _)| p);
        format!("{p}-*")
    };
    let mut kept = Vec::with_capacity(sent.len());
    for (k, v) in sent {
        if *k == second[0] {
            kept.push((
                "(also sent as)",
                format!("{} with the values of {}", prefix(second), prefix(first)),
            ));
        } else if !second.contains(k) {
            kept.push((*k, v.clone()));
        }
    }
    kept
}

/// The header that numbers an attempt, sent first with every one.
pub const ATTEMPT_HEADER: &str = "webhook-attempt";

/// The headers that open every attempt, in the order sent: its number, then under each set of
/// names the signed id, timestamp and signature. One rule for what is sent and for what an
/// attempt page shows of it ([`SentHeaders`]).
pub fn signing_headers(
    names: SignatureHeaders,
    attempt_number: i32,
    msg_id: &str,
    timestamp_secs: i64,
    signature: &str,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(signing_header_count(names));
    out.push((ATTEMPT_HEADER, attempt_number.to_string()));
    for [id, ts, sig] in names.names() {
        out.push((*id, msg_id.to_owned()));
        out.push((*ts, timestamp_secs.to_string()));
        out.push((*sig, signature.to_owned()));
    }
    out
}

/// How many headers [`signing_headers`] makes under `names`.
fn signing_header_count(names: SignatureHeaders) -> usize {
    1 + 3 * names.names().len()
}

/// What an attempt keeps of the headers hookd sent (decisions 97): the signature and the names
/// it went under, and whatever followed the signing headers (ordering key and sequence,
/// `traceparent`) as sent. The attempt number, the signed id (the message's) and the timestamp
/// (the attempt's start, in seconds) are the attempt's own columns, so they are worked out
/// again when shown instead of being stored as text with every attempt: 60–70 bytes where the
/// whole list took 243.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentHeaders {
    #[serde(rename = "n", with = "names_text")]
    pub names: SignatureHeaders,
    #[serde(rename = "s")]
    pub signature: String,
    #[serde(rename = "x", default, skip_serializing_if = "HeaderList::is_empty")]
    pub rest: HeaderList,
}

mod names_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::signing::SignatureHeaders;

    pub fn serialize<S: Serializer>(v: &SignatureHeaders, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SignatureHeaders, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The stored forms of an attempt's sent headers: since decisions 97, or the whole list kept
/// before it.
#[derive(Deserialize)]
#[serde(untagged)]
enum KeptSent {
    Compact(SentHeaders),
    Listed(HeaderList),
}

impl SentHeaders {
    /// What to keep of `sent`, the headers [`signing_headers`] opened under `names` followed by
    /// the rest of hookd's own (the endpoint's headers left out).
    pub fn keep(names: SignatureHeaders, sent: &[(&str, String)]) -> SentHeaders {
        let signature = names
            .names()
            .first()
            .and_then(|[.., sig]| sent.iter().find(|(k, _)| k == sig))
            .map(|(_, v)| cut(v, HEADER_VALUE_KEPT_BYTES))
            .unwrap_or_default();
        SentHeaders {
            names,
            signature,
            rest: HeaderList::bounded(
                sent.iter()
                    .skip(signing_header_count(names))
                    .map(|(k, v)| (*k, v)),
            ),
        }
    }

    /// The stored text (decisions 99): the names' setting and the signature on the first line
    /// (`both v1,…`), then the rest as [`HeaderList::to_stored`] writes it.
    pub fn to_stored(&self) -> String {
        let mut out = String::with_capacity(self.signature.len() + 8);
        out.push_str(self.names.as_str());
        out.push(' ');
        escape_into(&mut out, &self.signature, false);
        if !self.rest.is_empty() {
            out.push('\n');
            out.push_str(&self.rest.to_stored());
        }
        out
    }

    /// The headers as an attempt page shows them, from what was stored in any of its forms
    /// (this text; before decisions 99 JSON, since decisions 97 the same fields, before it the
    /// whole list): the attempt's number, message id and start fill in what
    /// [`SentHeaders::keep`] left out, and a second set of names is one line
    /// ([`kept_sent_headers`]).
    pub fn shown(
        stored: &str,
        attempt_number: i32,
        msg_id: &str,
        started_at: Timestamp,
    ) -> Result<HeaderList, UnreadableHeaders> {
        let kept = if stored.starts_with('{') {
            match serde_json::from_str(stored).map_err(UnreadableHeaders::of)? {
                KeptSent::Listed(list) => return Ok(list),
                KeptSent::Compact(kept) => kept,
            }
        } else {
            let (first, rest) = stored.split_once('\n').unwrap_or((stored, ""));
            let (names, signature) = first
                .split_once(' ')
                .ok_or_else(|| UnreadableHeaders(format!("no signature in {first:?}")))?;
            SentHeaders {
                names: names
                    .parse()
                    .map_err(|e| UnreadableHeaders(format!("{e}")))?,
                signature: unescape(signature),
                rest: HeaderList::from_stored(rest)?,
            }
        };
        let mut sent = signing_headers(
            kept.names,
            attempt_number,
            msg_id,
            started_at.as_secs(),
            &kept.signature,
        );
        sent.extend(
            kept.rest
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone())),
        );
        let headers = kept_sent_headers(&sent, kept.names.names())
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        Ok(HeaderList {
            headers,
            omitted: kept.rest.omitted,
        })
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl HeaderList {
    /// The first headers of `pairs` that fit the budget, long values cut.
    pub fn bounded<N: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (N, V)>,
    ) -> HeaderList {
        let mut list = HeaderList::default();
        let mut room = HEADERS_KEPT_BYTES;
        for (name, value) in pairs {
            let (name, value) = (name.as_ref(), cut(value.as_ref(), HEADER_VALUE_KEPT_BYTES));
            let size = name.len() + value.len();
            if size > room || list.omitted > 0 {
                list.omitted += 1;
                continue;
            }
            room -= size;
            list.headers.push((name.to_owned(), value));
        }
        list
    }

    /// The stored text (decisions 99): `name: value` a line, in order, and a last line `+N`
    /// when N headers were left out. A backslash, a line break and, in a name, `:`, `+` and `{`
    /// are escaped with a backslash, so each line splits at its first `:` and no line can pass
    /// for the count or the text for the JSON written before. 20–30 bytes shorter than that
    /// JSON for a receiver's usual two or three headers.
    pub fn to_stored(&self) -> String {
        let mut out = String::new();
        for (name, value) in &self.headers {
            if !out.is_empty() {
                out.push('\n');
            }
            escape_into(&mut out, name, true);
            out.push_str(": ");
            escape_into(&mut out, value, false);
        }
        if self.omitted > 0 {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push('+');
            out.push_str(&self.omitted.to_string());
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.omitted == 0
    }

    /// A list from [`HeaderList::to_stored`]'s text, or from the JSON stored before it.
    pub fn from_stored(text: &str) -> Result<HeaderList, UnreadableHeaders> {
        if text.starts_with('{') {
            return serde_json::from_str(text).map_err(UnreadableHeaders::of);
        }
        let mut list = HeaderList::default();
        for line in text.split('\n').filter(|l| !l.is_empty()) {
            if list.omitted > 0 {
                return Err(UnreadableHeaders(format!("{line:?} after the count")));
            }
            if let Some(count) = line.strip_prefix('+') {
                list.omitted = count
                    .parse()
                    .map_err(|_| UnreadableHeaders(format!("not a count: {line:?}")))?;
                continue;
            }
            let colon =
                name_end(line).ok_or_else(|| UnreadableHeaders(format!("no name in {line:?}")))?;
            let value = line[colon + 1..]
                .strip_prefix(' ')
                .unwrap_or(&line[colon + 1..]);
            list.headers
                .push((unescape(&line[..colon]), unescape(value)));
        }
        Ok(list)
    }
}

/// Stored headers that do not read back (a hand-edited row, or one from a newer hookd).
#[derive(Debug)]
pub struct UnreadableHeaders(String);

impl UnreadableHeaders {
    fn of(e: serde_json::Error) -> UnreadableHeaders {
        UnreadableHeaders(e.to_string())
    }
}

impl std::fmt::Display for UnreadableHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` with a backslash and a line break escaped, and in a name (`name`) also `:`, `+` and
/// `{` (see [`HeaderList::to_stored`]).
fn escape_into(out: &mut String, text: &str, name: bool) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            ':' | '+' | '{' if name => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

/// What [`escape_into`] escaped, back.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
        } else if let Some(next) = chars.next() {
            out.push(if next == 'n' { '\n' } else { next });
        }
    }
    out
}

/// Where a stored line's name ends: its first `:` that is not escaped.
fn name_end(line: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b':' => return Some(i),
            _ => {}
        }
    }
    None
}

/// `text` cut to at most `max` bytes on a character boundary, ending with "…" when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// One attempt as stored.
#[derive(Clone, Copy, Debug)]
pub struct AttemptFacts<'a> {
    pub url: &'a str,
    pub status: Option<u16>,
    pub error: Option<ErrorKind>,
    pub error_detail: Option<&'a str>,
    pub classification: Verdict,
    pub duration_ms: i32,
}

/// Its delivery as it stands now.
#[derive(Clone, Copy, Debug)]
pub struct DeliveryFacts {
    pub state: DeliveryState,
    pub attempt_count: i32,
    pub next_attempt_at: Timestamp,
    /// The attempt is the delivery's latest.
    pub latest: bool,
}

/// The status rules the endpoint follows now: its own overrides, and the preset that applies
/// when it chose none (the tenant's, else the server's).
#[derive(Clone, Debug)]
pub struct StatusRules {
    pub endpoint: StatusOverrides,
    pub fallback: StatusPreset,
}

/// Who reads: the tenant (dashboard) may be pointed at settings; the tenant's customer
/// (portal) is told what happened without any setting's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    Tenant,
    Customer,
}

/// An attempt in two sentences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// What happened on this try.
    pub happened: String,
    /// What comes next for its delivery (empty: nothing to say).
    pub next: String,
}

/// The text the dispatcher stores when a receiver asks to stop retrying a message.
const ABORT_MARK: &str = "asked to stop retrying";
/// The text the store keeps when a message was expunged before its retry.
const EXPUNGED_MARK: &str = "content was expunged";

pub fn explain(
    a: &AttemptFacts<'_>,
    d: &DeliveryFacts,
    rules: &StatusRules,
    reader: Reader,
    now: Timestamp,
) -> Explanation {
    Explanation {
        happened: happened(a),
        next: next(a, d, rules, reader, now),
    }
}

fn happened(a: &AttemptFacts<'_>) -> String {
    let took = duration_words(Duration::from_millis(a.duration_ms.max(0) as u64));
    let place = host_port(a.url);
    let detail = a.error_detail.unwrap_or_default();
    let cause = root_cause(detail);
    match (a.status, a.error) {
        (Some(code), _) if (200..=299).contains(&code) => {
            format!(
                "Delivered: the endpoint answered {} in {took}.",
                status_words(code)
            )
        }
        (Some(code), _) => format!("The endpoint answered {} after {took}.", status_words(code)),
        (None, None) if a.classification == Verdict::Success => {
            format!("Delivered: the broker confirmed the message in {took}.")
        }
        (None, Some(ErrorKind::Timeout)) => {
            format!("No answer from {place} within {took}: the request timed out.")
        }
        (None, Some(ErrorKind::Connect | ErrorKind::Dns)) if detail.contains("granted") => {
            format!(
                "Not sent: {place} is on a network this account may not reach (a private or \
                 reserved address)."
            )
        }
        (None, Some(ErrorKind::Connect)) if detail.to_ascii_lowercase().contains("refused") => {
            format!("Connection refused by {place}.")
        }
        (None, Some(ErrorKind::Connect)) => format!("Could not connect to {place}: {cause}."),
        (None, Some(ErrorKind::Dns)) => format!(
            "The name {} could not be found (DNS): {cause}.",
            host_of(a.url)
        ),
        (None, Some(ErrorKind::Tls)) => {
            format!("The secure connection (TLS) to {place} failed: {cause}.")
        }
        (None, Some(ErrorKind::Auth)) => {
            format!("Not sent: getting an access token for the endpoint failed: {cause}.")
        }
        (None, Some(ErrorKind::Broker)) => {
            format!("The broker did not take the message: {cause}.")
        }
        _ if detail.contains(EXPUNGED_MARK) => {
            "Not sent: the message's content was deleted before this try.".to_owned()
        }
        _ if detail.is_empty() => "The request failed without an answer.".to_owned(),
        _ => format!("The request failed: {cause}."),
    }
}

fn next(
    a: &AttemptFacts<'_>,
    d: &DeliveryFacts,
    rules: &StatusRules,
    reader: Reader,
    now: Timestamp,
) -> String {
    if !d.latest {
        return if a.classification == Verdict::Success {
            String::new()
        } else {
            "Another attempt followed this one.".to_owned()
        };
    }
    match d.state {
        DeliveryState::Succeeded => String::new(),
        DeliveryState::Pending if d.next_attempt_at > now => format!(
            "Next attempt in {}.",
            duration_words(d.next_attempt_at.since(now))
        ),
        DeliveryState::Pending => "Next attempt is due now.".to_owned(),
        DeliveryState::Sending => "It is being sent again right now.".to_owned(),
        DeliveryState::Paused => "Waiting: the endpoint is disabled; this message is sent when \
                                  it is enabled again."
            .to_owned(),
        DeliveryState::Skipped => "Skipped: later messages with the same ordering key went on \
                                   without it."
            .to_owned(),
        DeliveryState::Failed => gave_up(a, d, rules, reader),
    }
}

/// Why a dead delivery stopped after this attempt.
fn gave_up(a: &AttemptFacts<'_>, d: &DeliveryFacts, rules: &StatusRules, reader: Reader) -> String {
    let detail = a.error_detail.unwrap_or_default();
    let tries = match d.attempt_count {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    if a.classification != Verdict::Permanent {
        return format!("Gave up after {tries}: no attempt is left under the retry schedule.");
    }
    if detail.contains(ABORT_MARK) {
        return format!("Gave up after {tries}: the receiver asked not to retry this message.");
    }
    if detail.contains(EXPUNGED_MARK) {
        return "Gave up: there is nothing left to send.".to_owned();
    }
    let Some(code) = a.status else {
        return format!("Gave up after {tries}.");
    };
    if code == 410 {
        return "410 Gone ends retries and disables the endpoint: the receiver says it no \
                longer exists."
            .to_owned();
    }
    let effective = rules.endpoint.clone().or_preset(rules.fallback);
    let still = matches!(
        classify(Outcome::Status(code), &effective),
        Classification::Permanent { .. }
    );
    if !still || reader == Reader::Customer {
        return format!(
            "{code} ends retries for this endpoint: it is not sent again unless resent."
        );
    }
    if rules.endpoint.permanent_on().contains(&code) {
        format!(
            "{code} ends retries: this endpoint lists it as permanent (its permanentOn list, set \
             through the API)."
        )
    } else if let Some(own) = rules.endpoint.preset() {
        format!(
            "{code} ends retries under this endpoint's own status preset ({}), set through the \
             API.",
            own.as_str()
        )
    } else {
        format!(
            "{code} ends retries under this endpoint's status preset: change it in Settings → \
             Failed deliveries."
        )
    }
}

/// `401 Unauthorized`, or the bare code when it has no common name.
fn status_words(code: u16) -> String {
    let name = match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return code.to_string(),
    };
    format!("{code} {name}")
}

/// The last cause of an error chain (`a: b: Connection refused (os error 111)` → `Connection
/// refused`): the part a person can act on.
/// A failed try's cause in one line: its kind, the innermost cause of its error and where it
/// went (`connect: Connection refused (10.0.0.5:443)`). The attempt's page shows it and the
/// dispatcher logs it; never the URL's path or query. None when nothing went wrong below HTTP
/// (an answer's status code says the rest).
pub fn failure_cause(url: &str, error: Option<ErrorKind>, detail: Option<&str>) -> Option<String> {
    let detail = detail.filter(|d| !d.is_empty())?;
    Some(match error {
        Some(kind) => format!(
            "{}: {} ({})",
            kind.as_str(),
            root_cause(detail),
            host_port(url)
        ),
        None => detail.to_owned(),
    })
}

fn root_cause(detail: &str) -> &str {
    let last = detail.rsplit(": ").next().unwrap_or(detail).trim();
    match last.find(" (os error") {
        Some(i) => &last[..i],
        None => last,
    }
}

/// `host:port` of a URL, with the scheme's default port when none is written.
fn host_port(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    if has_port {
        return authority.to_owned();
    }
    match scheme {
        "https" => format!("{authority}:443"),
        "http" => format!("{authority}:80"),
        _ => authority.to_owned(),
    }
}

fn host_of(url: &str) -> String {
    let place = host_port(url);
    match place.rfind(':') {
        Some(i) if !place[i..].contains(']') => place[..i].to_owned(),
        _ => place,
    }
}

/// A duration as people say it: `120 ms`, `25 s`, `5 min`, `2 h 5 min`, `3 d`.
pub fn duration_words(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    match s {
        0 => format!("{ms} ms"),
        1..=59 if ms < 10_000 && !ms.is_multiple_of(1000) => format!("{:.1} s", d.as_secs_f64()),
        1..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", (s + 30) / 60),
        3600..=86_399 => match (s / 3600, (s % 3600 + 30) / 60) {
            (h, 0) => format!("{h} h"),
            (h, 60) => format!("{} h", h + 1),
            (h, m) => format!("{h} h {m} min"),
        },
        _ => format!("{} d", (s + 43_200) / 86_400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_set_of_signing_headers_is_kept_as_one_line() {
        let sent: Vec<(&str, String)> = vec![
            ("webhook-attempt", "1".into()),
            ("webhook-id", "msg_1".into()),
            ("webhook-timestamp", "1700000000".into()),
            ("webhook-signature", "v1,abc".into()),
            ("svix-id", "msg_1".into()),
            ("svix-timestamp", "1700000000".into()),
            ("svix-signature", "v1,abc".into()),
        ];
        let both = crate::signing::SignatureHeaders::Both.names();
        let kept = super::kept_sent_headers(&sent, both);
        let names: Vec<&str> = kept.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            names,
            [
                "webhook-attempt",
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature",
                "(also sent as)"
            ]
        );
        assert_eq!(kept[4].1, "svix-* with the values of webhook-*");
        // One set only, or values that differ: everything as sent.
        let one = crate::signing::SignatureHeaders::Svix.names();
        assert_eq!(super::kept_sent_headers(&sent, one).len(), 7);
        let mut odd = sent.clone();
        odd[6].1 = "v1,other".into();
        assert_eq!(super::kept_sent_headers(&odd, both).len(), 7);
    }

    /// Decisions 97: an attempt stores its signature and the names it went under, and its page
    /// shows every header as sent, in order, for each set of names; ordering and trace headers
    /// as sent; rows written before keep reading as they were.
    #[test]
    fn sent_headers_keep_the_signature_and_show_every_header_as_sent() {
        use crate::signing::SignatureHeaders;
        let started = Timestamp::from_millis(1_700_000_000_987);
        let signature = "v1,Lv3/Slt1BbfxqNzekfJcH6BEpS8j/f92MC2WkmoHmhQ= v1,second";
        for names in [
            SignatureHeaders::Both,
            SignatureHeaders::Webhook,
            SignatureHeaders::Svix,
        ] {
            for rest in [
                vec![],
                vec![
                    ("webhook-ordering-key", "k1".to_owned()),
                    ("webhook-sequence", "7".to_owned()),
                    ("traceparent", "00-abc-def-01".to_owned()),
                ],
            ] {
                let mut sent = signing_headers(names, 3, "msg_1", started.as_secs(), signature);
                sent.extend(rest.iter().cloned());
                let kept = SentHeaders::keep(names, &sent);
                let json = kept.to_stored();
                if rest.is_empty() {
                    // The whole list as it was kept before: 250 bytes and more.
                    let listed = HeaderList::bounded(kept_sent_headers(&sent, names.names()));
                    let listed = serde_json::to_string(&listed).unwrap();
                    assert!(listed.len() > 140, "{listed}");
                    assert!(json.len() < 90, "{json}");
                }
                let shown = SentHeaders::shown(&json, 3, "msg_1", started).unwrap();
                // The JSON form of decisions 97 reads the same.
                let as_json = serde_json::to_string(&kept).unwrap();
                assert_eq!(
                    SentHeaders::shown(&as_json, 3, "msg_1", started).unwrap(),
                    shown
                );
                let expected: Vec<(String, String)> = kept_sent_headers(&sent, names.names())
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                assert_eq!(shown.headers, expected, "{names:?} {json}");
                assert_eq!(shown.headers[0], ("webhook-attempt".into(), "3".into()));
                assert!(
                    shown
                        .headers
                        .contains(&(names.names()[0][1].to_owned(), "1700000000".to_owned()))
                );
            }
        }
        // A row kept before decisions 97 reads as stored.
        let old = r#"{"h":[["webhook-attempt","1"],["webhook-id","msg_9"]]}"#;
        let shown = SentHeaders::shown(old, 5, "msg_other", started).unwrap();
        assert_eq!(shown, HeaderList::from_stored(old).unwrap());
        assert!(SentHeaders::shown(r#"{"n":"neither","s":"v1,x"}"#, 1, "m", started).is_err());
        assert!(SentHeaders::shown("neither v1,x", 1, "m", started).is_err());
    }

    use super::*;

    const URL: &str = "https://10.0.0.5/hook";

    fn attempt(
        status: Option<u16>,
        error: Option<ErrorKind>,
        class: Verdict,
    ) -> AttemptFacts<'static> {
        AttemptFacts {
            url: URL,
            status,
            error,
            error_detail: None,
            classification: class,
            duration_ms: 120,
        }
    }

    fn failed(count: i32) -> DeliveryFacts {
        DeliveryFacts {
            state: DeliveryState::Failed,
            attempt_count: count,
            next_attempt_at: Timestamp::from_millis(0),
            latest: true,
        }
    }

    fn rules() -> StatusRules {
        StatusRules {
            endpoint: StatusOverrides::default(),
            fallback: StatusPreset::Default,
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000)
    }

    fn say(
        a: &AttemptFacts<'_>,
        d: &DeliveryFacts,
        r: &StatusRules,
        reader: Reader,
    ) -> Explanation {
        explain(a, d, r, reader, now())
    }

    #[test]
    fn a_dead_delivery_that_ran_out_of_retries_says_it_gave_up_after_its_attempts() {
        let e = say(
            &attempt(Some(503), None, Verdict::Retry),
            &failed(3),
            &rules(),
            Reader::Tenant,
        );
        assert_eq!(
            e.happened,
            "The endpoint answered 503 Service Unavailable after 120 ms."
        );
        assert!(e.next.starts_with("Gave up after 3 attempts"), "{}", e.next);
    }

    #[test]
    fn a_401_points_the_tenant_to_the_setting_that_decides_it_and_the_customer_to_nothing() {
        let a = attempt(Some(401), None, Verdict::Permanent);
        let tenant = say(&a, &failed(1), &rules(), Reader::Tenant);
        assert_eq!(
            tenant.next,
            "401 ends retries under this endpoint's status preset: change it in Settings → \
             Failed deliveries."
        );
        let customer = say(&a, &failed(1), &rules(), Reader::Customer);
        assert!(
            customer
                .next
                .starts_with("401 ends retries for this endpoint"),
            "{}",
            customer.next
        );
        assert!(!customer.next.contains("Settings") && !customer.next.contains("API"));
        // The endpoint's own choices are named as such.
        let own = StatusRules {
            endpoint: StatusOverrides::new(StatusPreset::Default, vec![], vec![]).unwrap(),
            ..rules()
        };
        assert!(
            say(&a, &failed(1), &own, Reader::Tenant)
                .next
                .contains("own status preset (default)")
        );
        let listed = StatusRules {
            endpoint: StatusOverrides::new(None, vec![], vec![401]).unwrap(),
            ..rules()
        };
        assert!(
            say(&a, &failed(1), &listed, Reader::Tenant)
                .next
                .contains("permanentOn")
        );
        // Rules changed since: no pointer to a setting that no longer decides it.
        let now_retries = StatusRules {
            endpoint: StatusOverrides::new(StatusPreset::RetryAllBut410, vec![], vec![]).unwrap(),
            ..rules()
        };
        assert!(
            say(&a, &failed(1), &now_retries, Reader::Tenant)
                .next
                .starts_with("401 ends retries for this endpoint")
        );
    }

    #[test]
    fn a_failure_cause_is_one_line_without_the_path_or_query() {
        let detail = "error sending request for url (https://10.0.0.5/hook?token=s3cret): client \
                      error (Connect): tcp connect error: Connection refused (os error 111)";
        assert_eq!(
            failure_cause(
                "https://10.0.0.5/hook?token=s3cret",
                Some(ErrorKind::Connect),
                Some(detail)
            )
            .as_deref(),
            Some("connect: Connection refused (10.0.0.5:443)")
        );
        let asked = "the receiver asked to stop retrying this message";
        assert_eq!(
            failure_cause("https://a.example/h", None, Some(asked)).as_deref(),
            Some(asked)
        );
        assert_eq!(failure_cause("https://a.example/h", None, None), None);
        assert_eq!(failure_cause("https://a.example/h", None, Some("")), None);
    }

    #[test]
    fn network_failures_name_the_place_in_plain_words() {
        let mut a = attempt(None, Some(ErrorKind::Connect), Verdict::Retry);
        a.error_detail = Some(
            "error sending request for url (https://10.0.0.5/hook): client error (Connect): \
             tcp connect error: Connection refused (os error 111)",
        );
        assert_eq!(happened(&a), "Connection refused by 10.0.0.5:443.");
        a.error_detail =
            Some("error sending request: tcp connect error: Network is unreachable (os error 101)");
        assert_eq!(
            happened(&a),
            "Could not connect to 10.0.0.5:443: Network is unreachable."
        );
        a.error = Some(ErrorKind::Dns);
        a.url = "http://nowhere.invalid:8080/x";
        a.error_detail = Some(
            "client error (Connect): dns error: failed to lookup address information: Name or service not known",
        );
        assert_eq!(
            happened(&a),
            "The name nowhere.invalid could not be found (DNS): Name or service not known."
        );
        a.error_detail = Some(
            "destination 10.0.0.5 is private; hookd reaches it only where the operator granted that network to your account",
        );
        assert!(happened(&a).starts_with("Not sent: nowhere.invalid:8080 is on a network"));
        let t = AttemptFacts {
            duration_ms: 15_000,
            ..attempt(None, Some(ErrorKind::Timeout), Verdict::Retry)
        };
        assert_eq!(
            happened(&t),
            "No answer from 10.0.0.5:443 within 15 s: the request timed out."
        );
    }

    #[test]
    fn a_pending_delivery_says_when_it_is_tried_next_and_an_older_attempt_says_one_followed() {
        let d = DeliveryFacts {
            state: DeliveryState::Pending,
            attempt_count: 1,
            next_attempt_at: now().plus(Duration::from_secs(25)),
            latest: true,
        };
        let a = attempt(None, Some(ErrorKind::Connect), Verdict::Retry);
        assert_eq!(
            say(&a, &d, &rules(), Reader::Tenant).next,
            "Next attempt in 25 s."
        );
        let older = DeliveryFacts { latest: false, ..d };
        assert_eq!(
            say(&a, &older, &rules(), Reader::Tenant).next,
            "Another attempt followed this one."
        );
        let ok = attempt(Some(200), None, Verdict::Success);
        let done = DeliveryFacts {
            state: DeliveryState::Succeeded,
            ..d
        };
        let e = say(&ok, &done, &rules(), Reader::Customer);
        assert_eq!(
            e.happened,
            "Delivered: the endpoint answered 200 OK in 120 ms."
        );
        assert_eq!(e.next, "");
    }

    #[test]
    fn gone_and_abort_explain_why_retries_ended() {
        let gone = say(
            &attempt(Some(410), None, Verdict::Permanent),
            &failed(2),
            &rules(),
            Reader::Tenant,
        );
        assert!(gone.next.contains("disables the endpoint"), "{}", gone.next);
        let mut a = attempt(Some(500), None, Verdict::Permanent);
        a.error_detail = Some(
            "the receiver asked to stop retrying this message (webhook-delivery: abort-message)",
        );
        assert!(
            say(&a, &failed(2), &rules(), Reader::Tenant)
                .next
                .contains("asked not to retry")
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        let w = |s: u64| duration_words(Duration::from_secs(s));
        assert_eq!(duration_words(Duration::from_millis(42)), "42 ms");
        assert_eq!(duration_words(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(w(25), "25 s");
        assert_eq!(w(300), "5 min");
        assert_eq!(w(7500), "2 h 5 min");
        assert_eq!(w(3 * 86_400), "3 d");
    }

    #[test]
    fn header_lists_are_bounded_and_say_how_many_were_left_out() {
        let long = "x".repeat(HEADER_VALUE_KEPT_BYTES * 2);
        let many: Vec<(String, String)> = (0..100)
            .map(|i| (format!("x-h{i}"), long.clone()))
            .collect();
        let list = HeaderList::bounded(many.iter().map(|(k, v)| (k, v)));
        let size: usize = list.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(size <= HEADERS_KEPT_BYTES, "{size}");
        assert!(list.headers[0].1.ends_with('…'));
        assert_eq!(list.headers.len() + list.omitted as usize, 100);
        let back = HeaderList::from_stored(&list.to_stored()).unwrap();
        assert_eq!(back, list);
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(HeaderList::from_stored(&json).unwrap(), list);
        // Cut on a character boundary.
        let wide = "é".repeat(HEADER_VALUE_KEPT_BYTES);
        let one = HeaderList::bounded([("x", wide.as_str())]);
        assert!(one.headers[0].1.len() <= HEADER_VALUE_KEPT_BYTES);
    }

    /// Decisions 99: any name and value read back as written, whatever they hold, and the
    /// text is shorter than the JSON it replaces.
    #[test]
    fn stored_headers_read_back_as_written_whatever_they_hold() {
        let odd = [
            "",
            ":",
            "a:b",
            "+3",
            "{x",
            "\\",
            "\\n",
            "line\nbreak",
            "é…",
            " lead",
            "trail ",
            "a: b",
            "+",
        ];
        let mut lists = vec![HeaderList::default()];
        for name in odd {
            for value in odd {
                lists.push(HeaderList {
                    headers: vec![(name.into(), value.into()), ("date".into(), value.into())],
                    omitted: 0,
                });
            }
        }
        lists.push(HeaderList {
            headers: vec![("+1".into(), "+2".into())],
            omitted: 3,
        });
        lists.push(HeaderList {
            headers: vec![],
            omitted: 7,
        });
        for list in lists {
            let text = list.to_stored();
            assert_eq!(HeaderList::from_stored(&text).unwrap(), list, "{text:?}");
            let kept = SentHeaders {
                names: SignatureHeaders::Webhook,
                signature: list
                    .headers
                    .first()
                    .map(|h| h.1.clone())
                    .unwrap_or_default(),
                rest: list.clone(),
            };
            let stored = kept.to_stored();
            let started = Timestamp::from_millis(1_700_000_000_000);
            let shown = SentHeaders::shown(&stored, 1, "msg_1", started).unwrap();
            let mut sent =
                signing_headers(kept.names, 1, "msg_1", started.as_secs(), &kept.signature);
            sent.extend(list.headers.iter().map(|(k, v)| (k.as_str(), v.clone())));
            let expected: Vec<(String, String)> =
                sent.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            assert_eq!(shown.headers, expected, "{stored:?}");
            assert_eq!(shown.omitted, list.omitted, "{stored:?}");
        }
        let received = HeaderList {
            headers: vec![
                ("content-length".into(), "2".into()),
                ("date".into(), "Sun, 29 Nov 2026 01:43:09 GMT".into()),
            ],
            omitted: 0,
        };
        let json = serde_json::to_string(&received).unwrap();
        assert_eq!(
            (received.to_stored().len(), json.len()),
            (53, 71),
            "{}",
            received.to_stored()
        );
        assert!(HeaderList::from_stored("no colon here").is_err());
        assert!(HeaderList::from_stored("+2\na: b").is_err());
    }
}
