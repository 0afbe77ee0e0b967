//! Broker destinations (issue 21): an endpoint whose URL names a RabbitMQ exchange, a NATS
//! JetStream subject or a Redis stream instead of an HTTP receiver. Such an endpoint is an
//! endpoint in every other way (retries, backoff, dead letters, replay, flow control, the
//! dashboard); only the last step, the send, publishes to the broker and waits for its
//! confirmation.
//!
//! The URL forms (credentials never go in the URL; they are the endpoint's sealed `auth`):
//! - `amqp://host[:5672][/vhost]?exchange=E&routing_key=K` — the default exchange (`exchange`
//!   left out) with `routing_key` naming the queue, or a named exchange;
//! - `nats://host[:4222]?subject=S` — a subject some JetStream stream captures;
//! - `redis://host[:6379]?stream=K[&maxlen=N]` — `XADD` to stream `K`, trimmed to about `N`
//!   entries when given.
//!
//! Names are checked strictly (letters, digits and `._:-`), so what the tenant wrote is what
//! the broker receives, with no percent-decoding in between.

use std::fmt;

/// The longest exchange, routing key, subject, stream or vhost name accepted (AMQP's limit for
/// a short string).
pub const MAX_NAME_LEN: usize = 255;
/// The largest `maxlen` for a Redis stream.
pub const MAX_STREAM_LEN: u64 = 1_000_000_000;

/// Which broker a destination publishes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BrokerKind {
    Amqp,
    Nats,
    Redis,
}

impl BrokerKind {
    /// The URL scheme, which is also the name shown to users.
    pub const fn scheme(self) -> &'static str {
        match self {
            BrokerKind::Amqp => "amqp",
            BrokerKind::Nats => "nats",
            BrokerKind::Redis => "redis",
        }
    }

    pub const fn default_port(self) -> u16 {
        match self {
            BrokerKind::Amqp => 5672,
            BrokerKind::Nats => 4222,
            BrokerKind::Redis => 6379,
        }
    }

    pub fn from_scheme(scheme: &str) -> Option<BrokerKind> {
        [BrokerKind::Amqp, BrokerKind::Nats, BrokerKind::Redis]
            .into_iter()
            .find(|k| k.scheme().eq_ignore_ascii_case(scheme))
    }
}

/// Where on the broker a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    Amqp {
        vhost: String,
        /// Empty: the default exchange, which routes by queue name.
        exchange: String,
        routing_key: String,
    },
    Nats {
        subject: String,
    },
    Redis {
        stream: String,
        maxlen: Option<u64>,
    },
}

impl Destination {
    pub fn kind(&self) -> BrokerKind {
        match self {
            Destination::Amqp { .. } => BrokerKind::Amqp,
            Destination::Nats { .. } => BrokerKind::Nats,
            Destination::Redis { .. } => BrokerKind::Redis,
        }
    }

    /// Reads the destination from a broker URL's `/path?query` (what follows the authority).
    pub fn parse(kind: BrokerKind, path_and_query: &str) -> Result<Destination, BadDestination> {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let mut params: Vec<(&str, &str)> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if params.iter().any(|(seen, _)| *seen == k) {
                return Err(BadDestination(format!("{k:?} is given twice")));
            }
            params.push((k, v));
        }
        let allowed: &[&str] = match kind {
            BrokerKind::Amqp => &["exchange", "routing_key"],
            BrokerKind::Nats => &["subject"],
            BrokerKind::Redis => &["stream", "maxlen"],
        };
        if let Some((k, _)) = params.iter().find(|(k, _)| !allowed.contains(k)) {
            return Err(BadDestination(format!(
                "{k:?} is not a setting of a {} URL (it takes {})",
                kind.scheme(),
                allowed.join(", ")
            )));
        }
        let get = |name: &str| params.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        let path = path.trim_start_matches('/');
        if kind != BrokerKind::Amqp && !path.is_empty() {
            return Err(BadDestination(format!(
                "a {} URL has no path; name the {} with ?{}=",
                kind.scheme(),
                allowed[0],
                allowed[0]
            )));
        }
        match kind {
            BrokerKind::Amqp => {
                let vhost = match path {
                    "" => "/".to_owned(),
                    v => name("vhost", v)?.to_owned(),
                };
                let exchange = match get("exchange") {
                    None | Some("") => String::new(),
                    Some(e) => name("exchange", e)?.to_owned(),
                };
                let routing_key = match get("routing_key") {
                    None | Some("") if exchange.is_empty() => {
                        return Err(BadDestination(
                            "routing_key is required with the default exchange: it names the \
                             queue, e.g. amqp://host/?routing_key=webhooks"
                                .into(),
                        ));
                    }
                    None | Some("") => String::new(),
                    Some(k) => name("routing_key", k)?.to_owned(),
                };
                Ok(Destination::Amqp {
                    vhost,
                    exchange,
                    routing_key,
                })
            }
            BrokerKind::Nats => {
                let subject = get("subject").ok_or_else(|| {
                    BadDestination("subject is required, e.g. nats://host?subject=webhooks".into())
                })?;
                let subject = name("subject", subject)?;
                if subject.split('.').any(str::is_empty) {
                    return Err(BadDestination(
                        "subject must not start or end with '.' or contain '..'".into(),
                    ));
                }
                Ok(Destination::Nats {
                    subject: subject.to_owned(),
                })
            }
            BrokerKind::Redis => {
                let stream = get("stream").ok_or_else(|| {
                    BadDestination("stream is required, e.g. redis://host?stream=webhooks".into())
                })?;
                let maxlen = get("maxlen")
                    .map(|m| match m.parse::<u64>() {
                        Ok(n) if (1..=MAX_STREAM_LEN).contains(&n) => Ok(n),
                        _ => Err(BadDestination(format!(
                            "maxlen must be a number from 1 to {MAX_STREAM_LEN}"
                        ))),
                    })
                    .transpose()?;
                Ok(Destination::Redis {
                    stream: name("stream", stream)?.to_owned(),
                    maxlen,
                })
            }
        }
    }
}

/// A name of the destination: 1 to [`MAX_NAME_LEN`] of letters, digits and `._:-` (and no
/// `*` or `>`, NATS's wildcards, which a publish cannot use).
fn name<'a>(what: &str, v: &'a str) -> Result<&'a str, BadDestination> {
    let ok = !v.is_empty()
        && v.len() <= MAX_NAME_LEN
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(v)
    } else {
        Err(BadDestination(format!(
            "{what} must be 1 to {MAX_NAME_LEN} letters, digits, '.', '_', ':' or '-'"
        )))
    }
}

/// Why a broker URL names no usable destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadDestination(pub String);

impl fmt::Display for BadDestination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(kind: BrokerKind, s: &str) -> Result<Destination, String> {
        Destination::parse(kind, s).map_err(|e| e.0)
    }

    #[test]
    fn each_broker_reads_its_destination() {
        assert_eq!(
            parse(BrokerKind::Amqp, "?routing_key=hooks"),
            Ok(Destination::Amqp {
                vhost: "/".into(),
                exchange: String::new(),
                routing_key: "hooks".into()
            })
        );
        assert_eq!(
            parse(BrokerKind::Amqp, "/prod?exchange=events&routing_key=a.b"),
            Ok(Destination::Amqp {
                vhost: "prod".into(),
                exchange: "events".into(),
                routing_key: "a.b".into()
            })
        );
        assert_eq!(
            parse(BrokerKind::Amqp, "/?exchange=fanout"),
            Ok(Destination::Amqp {
                vhost: "/".into(),
                exchange: "fanout".into(),
                routing_key: String::new()
            })
        );
        assert_eq!(
            parse(BrokerKind::Nats, "?subject=orders.created"),
            Ok(Destination::Nats {
                subject: "orders.created".into()
            })
        );
        assert_eq!(
            parse(BrokerKind::Redis, "/?stream=hooks&maxlen=1000"),
            Ok(Destination::Redis {
                stream: "hooks".into(),
                maxlen: Some(1000)
            })
        );
    }

    #[test]
    fn a_destination_that_cannot_be_published_to_is_refused_with_the_reason() {
        let refused = |k, s: &str, says: &str| {
            let why = parse(k, s).unwrap_err();
            assert!(why.contains(says), "{s}: {why}");
        };
        refused(BrokerKind::Amqp, "", "routing_key is required");
        refused(BrokerKind::Amqp, "?routing_key=a&routing_key=b", "twice");
        refused(BrokerKind::Amqp, "?queue=a", "not a setting");
        refused(BrokerKind::Amqp, "/a%2Fb?routing_key=q", "vhost must be");
        refused(BrokerKind::Nats, "", "subject is required");
        refused(BrokerKind::Nats, "?subject=orders.*", "subject must be");
        refused(BrokerKind::Nats, "?subject=orders..x", "'..'");
        refused(BrokerKind::Nats, "/orders", "no path");
        refused(BrokerKind::Redis, "?stream=", "stream must be");
        refused(BrokerKind::Redis, "?stream=s&maxlen=0", "maxlen must be");
        refused(BrokerKind::Redis, "?stream=s&maxlen=x", "maxlen must be");
        let long = format!("?stream={}", "s".repeat(MAX_NAME_LEN + 1));
        refused(BrokerKind::Redis, &long, "stream must be");
    }
}
