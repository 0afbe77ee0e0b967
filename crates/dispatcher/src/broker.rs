//! Publishing to broker destinations (issue 21; `domain::broker` has the URL forms): RabbitMQ
//! with publisher confirms, NATS JetStream with its publish ack, Redis Streams with `XADD`'s
//! reply. An attempt succeeds only once the broker has said it holds the message; anything
//! else (down, refusing, unroutable, no stream, slow) is an attempt error the delivery engine
//! retries like a network error, so a broker that is down delays messages and loses none.
//!
//! The SSRF guard applies as to HTTP: the host is resolved here, every address checked against
//! the tenant's egress, and the client connects to the checked address (a name cannot pass the
//! check and then resolve elsewhere). A connection is shared only by attempts with the same
//! credentials, and every attempt checks the addresses it was made to against its own tenant's
//! egress and namespace, so a grant revoked, or another tenant with the same credentials, never
//! rides on a connection opened under someone else's grant. Credentials are the endpoint's
//! sealed `auth`, and required: basic for user and password, bearer for a NATS token or a Redis
//! password; a broker's default user (RabbitMQ's `guest`, Redis's `default`) is never assumed.
//!
//! One connection per (broker, host and port, vhost, credentials), opened on first use and kept
//! while it works; an attempt that fails drops it, and the next attempt connects anew. At most
//! [`MAX_CONNECTIONS`] are kept (then the cache starts over).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::broker::{BrokerKind, Destination};
use domain::delivery::ErrorKind;
use domain::egress::Egress;
use domain::endpoint_auth::EndpointAuth;
use domain::endpoint_url::EndpointUrl;

pub const MAX_CONNECTIONS: usize = 1_000;

/// A message as it goes to a broker: its body and the metadata an HTTP attempt sends as headers
/// (`headers`: name and value, in order; the Standard Webhooks id, timestamp and signature
/// among them).
pub(crate) struct Outgoing<'a> {
    pub id: &'a str,
    pub event_type: &'a str,
    pub payload: &'a [u8],
    pub headers: Vec<(&'a str, String)>,
}

/// The broker's receipt (shown as the attempt's response), or why the attempt failed.
pub(crate) type Published = Result<String, (ErrorKind, String)>;

#[derive(Clone, PartialEq, Eq, Hash)]
enum Credentials {
    Password { user: String, pass: String },
    Token(String),
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: BrokerKind,
    host: String,
    port: u16,
    vhost: String,
    credentials: Credentials,
}

#[derive(Clone)]
enum Conn {
    Amqp {
        // Kept so the connection lives as long as its channel is used.
        _connection: Arc<lapin::Connection>,
        channel: lapin::Channel,
    },
    Nats(async_nats::jetstream::Context),
    Redis(redis::aio::MultiplexedConnection),
}

/// A connection and the address it was made to.
type Slot = Arc<tokio::sync::Mutex<Option<(Conn, IpAddr)>>>;

/// The dispatcher's broker connections.
#[derive(Default)]
pub struct Brokers {
    slots: Mutex<HashMap<Key, Slot>>,
}

impl Brokers {
    /// Publishes `out` to `url`'s destination and waits, at most `timeout` in all, for the
    /// broker to confirm it.
    pub(crate) async fn publish(
        &self,
        url: &EndpointUrl,
        egress: &Egress,
        auth: Option<&EndpointAuth>,
        out: Outgoing<'_>,
        timeout: Duration,
    ) -> Published {
        let Some(dest) = url.destination() else {
            return Err((ErrorKind::Http, "not a broker URL".into()));
        };
        let key = Key {
            kind: dest.kind(),
            host: url.host().to_owned(),
            port: url.port(),
            vhost: match dest {
                Destination::Amqp { vhost, .. } => vhost.clone(),
                _ => String::new(),
            },
            credentials: credentials(dest.kind(), auth)?,
        };
        let slot = self.slot(&key);
        let work = async {
            let mut held = slot.lock().await;
            let conn = match held.as_ref() {
                Some((c, ip)) => {
                    // Resolved when connecting, not for every message; but judged for every
                    // message, by this attempt's tenant.
                    admit(egress, url, dest, [*ip])?;
                    c.clone()
                }
                None => {
                    let addr = resolve(url, egress, dest).await?;
                    let c = connect(&key, addr).await?;
                    *held = Some((c.clone(), addr.ip()));
                    c
                }
            };
            drop(held);
            send(&conn, dest, &out).await
        };
        let sent = match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err((
                ErrorKind::Timeout,
                format!(
                    "the {} broker did not confirm within {} ms",
                    dest.kind().scheme(),
                    timeout.as_millis()
                ),
            )),
        };
        if sent.is_err() {
            // Whatever failed, a timeout included (a connection that stopped answering, or a
            // broker that holds publishers back), the next attempt starts from a new one.
            *slot.lock().await = None;
        }
        sent
    }

    fn slot(&self, key: &Key) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() >= MAX_CONNECTIONS && !slots.contains_key(key) {
            slots.clear();
        }
        slots.entry(key.clone()).or_default().clone()
    }
}

/// Whether `egress` opens `ips` to this URL's destination (its namespace included).
fn admit(
    egress: &Egress,
    url: &EndpointUrl,
    dest: &Destination,
    ips: impl IntoIterator<Item = IpAddr>,
) -> Result<(), (ErrorKind, String)> {
    egress
        .admit_broker(url.host(), ips, dest)
        .map_err(|why| (ErrorKind::Connect, why))
}

/// The address to connect to: the literal, or the first of what the name resolves to, once
/// every address it resolves to passed the guard.
async fn resolve(
    url: &EndpointUrl,
    egress: &Egress,
    dest: &Destination,
) -> Result<SocketAddr, (ErrorKind, String)> {
    let port = url.port();
    let addrs: Vec<SocketAddr> = match url.host_ip() {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => tokio::net::lookup_host((url.host(), port))
            .await
            .map_err(|e| {
                (
                    ErrorKind::Dns,
                    format!("cannot resolve {:?}: {e}", url.host()),
                )
            })?
            .collect(),
    };
    admit(egress, url, dest, addrs.iter().map(|a| a.ip()))?;
    addrs.first().copied().ok_or_else(|| {
        (
            ErrorKind::Dns,
            format!("{:?} resolves to no address", url.host()),
        )
    })
}

fn credentials(
    kind: BrokerKind,
    auth: Option<&EndpointAuth>,
) -> Result<Credentials, (ErrorKind, String)> {
    match (auth, kind) {
        (None, k) => Err((
            ErrorKind::Auth,
            format!(
                "a {} destination needs credentials: set the endpoint's authentication (basic: \
                 user and password{})",
                k.scheme(),
                if k == BrokerKind::Amqp {
                    ""
                } else {
                    "; or bearer: a token or password"
                }
            ),
        )),
        (Some(EndpointAuth::Basic { username, password }), _) => Ok(Credentials::Password {
            user: username.clone(),
            pass: password.clone(),
        }),
        (Some(EndpointAuth::Bearer { token }), BrokerKind::Nats | BrokerKind::Redis) => {
            Ok(Credentials::Token(token.clone()))
        }
        (Some(EndpointAuth::Bearer { .. }), BrokerKind::Amqp) => Err((
            ErrorKind::Auth,
            "RabbitMQ takes a username and password: set basic authentication".into(),
        )),
        (Some(EndpointAuth::OAuth(_)), k) => Err((
            ErrorKind::Auth,
            format!(
                "OAuth is for HTTP endpoints; a {} destination takes basic (or bearer) authentication",
                k.scheme()
            ),
        )),
    }
}

fn failed(kind: ErrorKind, what: &str, e: impl std::fmt::Display) -> (ErrorKind, String) {
    (kind, format!("{what}: {e}"))
}

async fn connect(key: &Key, addr: SocketAddr) -> Result<Conn, (ErrorKind, String)> {
    let (host, port) = (addr.ip().to_string(), addr.port());
    match key.kind {
        BrokerKind::Amqp => {
            let Credentials::Password { user, pass } = &key.credentials else {
                return Err((
                    ErrorKind::Auth,
                    "RabbitMQ takes a username and password: set basic authentication".into(),
                ));
            };
            let (username, password) = (user.clone(), pass.clone());
            let uri = lapin::uri::AMQPUri {
                authority: lapin::uri::AMQPAuthority {
                    userinfo: lapin::uri::AMQPUserInfo { username, password },
                    host,
                    port,
                },
                vhost: key.vhost.clone(),
                ..Default::default()
            };
            let connection =
                lapin::Connection::connect_uri(uri, lapin::ConnectionProperties::default())
                    .await
                    .map_err(|e| failed(ErrorKind::Connect, "connecting to RabbitMQ", e))?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| failed(ErrorKind::Broker, "opening a RabbitMQ channel", e))?;
            channel
                .confirm_select(Default::default())
                .await
                .map_err(|e| failed(ErrorKind::Broker, "turning on publisher confirms", e))?;
            Ok(Conn::Amqp {
                _connection: Arc::new(connection),
                channel,
            })
        }
        BrokerKind::Nats => {
            let options = match &key.credentials {
                Credentials::Password { user, pass } => {
                    async_nats::ConnectOptions::new().user_and_password(user.clone(), pass.clone())
                }
                Credentials::Token(t) => async_nats::ConnectOptions::new().token(t.clone()),
            };
            // A client that lost its server reconnects a few times on its own; after that
            // (or any failed publish) the next attempt makes a new one.
            let client = options
                .connection_timeout(Duration::from_secs(10))
                .max_reconnects(3)
                .connect(format!("nats://{addr}"))
                .await
                .map_err(|e| failed(ErrorKind::Connect, "connecting to NATS", e))?;
            Ok(Conn::Nats(async_nats::jetstream::new(client)))
        }
        BrokerKind::Redis => {
            let mut settings = redis::RedisConnectionInfo::default();
            match &key.credentials {
                Credentials::Password { user, pass } => {
                    settings = settings.set_username(user).set_password(pass);
                }
                Credentials::Token(t) => settings = settings.set_password(t),
            }
            let info = redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(
                host, port,
            ))
            .map_err(|e| failed(ErrorKind::Connect, "connecting to Redis", e))?
            .set_redis_settings(settings);
            let client = redis::Client::open(info)
                .map_err(|e| failed(ErrorKind::Connect, "connecting to Redis", e))?;
            // The attempt's own timeout bounds the wait; redis-rs's default of 500 ms per
            // answer would fail a publish the server took, under load, and send a copy.
            let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
            let conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|e| failed(ErrorKind::Connect, "connecting to Redis", e))?;
            Ok(Conn::Redis(conn))
        }
    }
}

async fn send(conn: &Conn, dest: &Destination, out: &Outgoing<'_>) -> Published {
    match (conn, dest) {
        (
            Conn::Amqp { channel, .. },
            Destination::Amqp {
                exchange,
                routing_key,
                ..
            },
        ) => {
            use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
            let mut headers = FieldTable::default();
            for (k, v) in &out.headers {
                headers.insert(
                    ShortString::from(*k),
                    AMQPValue::LongString(LongString::from(v.as_str())),
                );
            }
            let properties = lapin::BasicProperties::default()
                .with_message_id(out.id.into())
                .with_type(out.event_type.into())
                .with_content_type("application/json".into())
                // Persistent: kept by a durable queue across a broker restart.
                .with_delivery_mode(2)
                .with_headers(headers);
            let options = lapin::options::BasicPublishOptions {
                // An unroutable message comes back instead of vanishing.
                mandatory: true,
                ..Default::default()
            };
            let confirm = channel
                .basic_publish(
                    exchange.as_str().into(),
                    routing_key.as_str().into(),
                    options,
                    out.payload,
                    properties,
                )
                .await
                .map_err(|e| failed(ErrorKind::Broker, "publishing to RabbitMQ", e))?
                .await
                .map_err(|e| failed(ErrorKind::Broker, "waiting for RabbitMQ's confirm", e))?;
            let target = match exchange.as_str() {
                "" => format!("queue {routing_key:?}"),
                e => format!("exchange {e:?} with routing key {routing_key:?}"),
            };
            match confirm {
                lapin::Confirmation::Ack(None) => Ok(format!("confirmed by RabbitMQ: {target}")),
                lapin::Confirmation::Ack(Some(_)) => Err((
                    ErrorKind::Broker,
                    format!(
                        "RabbitMQ could not route the message to {target} (no such queue or binding)"
                    ),
                )),
                lapin::Confirmation::Nack(_) => Err((
                    ErrorKind::Broker,
                    format!("RabbitMQ refused the message for {target}"),
                )),
                lapin::Confirmation::NotRequested => Err((
                    ErrorKind::Broker,
                    "RabbitMQ did not confirm the message".into(),
                )),
            }
        }
        (Conn::Nats(js), Destination::Nats { subject }) => {
            let mut headers = async_nats::HeaderMap::new();
            // JetStream drops a second copy with the same id within its duplicate window.
            headers.insert("Nats-Msg-Id", out.id);
            headers.insert("hookd-event-type", out.event_type);
            for (k, v) in &out.headers {
                headers.insert(*k, v.as_str());
            }
            let ack = js
                .publish_with_headers(subject.clone(), headers, out.payload.to_vec().into())
                .await
                .map_err(|e| failed(ErrorKind::Broker, "publishing to NATS", e))?
                .await
                .map_err(|e| {
                    failed(
                        ErrorKind::Broker,
                        &format!("JetStream did not take the message on {subject:?}"),
                        e,
                    )
                })?;
            Ok(format!(
                "stored by JetStream: stream {:?}, sequence {}{}",
                ack.stream,
                ack.sequence,
                if ack.duplicate {
                    " (a copy it already held)"
                } else {
                    ""
                }
            ))
        }
        (Conn::Redis(conn), Destination::Redis { stream, maxlen }) => {
            let mut cmd = redis::cmd("XADD");
            cmd.arg(stream);
            if let Some(n) = maxlen {
                cmd.arg("MAXLEN").arg("~").arg(*n);
            }
            cmd.arg("*")
                .arg("id")
                .arg(out.id)
                .arg("type")
                .arg(out.event_type);
            for (k, v) in &out.headers {
                cmd.arg(*k).arg(v.as_str());
            }
            cmd.arg("body").arg(out.payload);
            let entry: String = cmd
                .query_async(&mut conn.clone())
                .await
                .map_err(|e| failed(ErrorKind::Broker, "XADD to Redis", e))?;
            Ok(format!("added to Redis stream {stream:?} as entry {entry}"))
        }
        _ => Err((
            ErrorKind::Broker,
            "the connection does not match the destination".into(),
        )),
    }
}
