//! SQLite's hot path without a thread hop per statement (decisions 25).
//!
//! sqlx runs every SQLite connection on a worker thread of its own, so each statement of a
//! transaction is a round trip between threads: on two busy cores a batch of ~6 statements
//! waited 0.3–1.5 ms per statement for that thread to be scheduled, while holding SQLite's
//! single write lock. The two writes every message pays for (its creation, and its attempt's
//! result) therefore run here instead: whole transactions on a thread that owns a rusqlite
//! connection to the same file, so a batch costs one hand-over however many statements it has.
//!
//! Rows are written with one prepared single-row statement per table whose column list comes
//! from the sea-orm entity; the few other statements are built by sea-query, as on PostgreSQL,
//! and bound here. Everything else keeps using the sea-orm pool.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};
use sea_orm::sea_query::Value;
use sea_orm::{DbBackend, EntityTrait, IdenStatic, Iterable, ModelTrait, Statement};
use tokio::sync::{mpsc, oneshot};

use crate::entities::{delivery, endpoint, endpoint_secret};
use crate::ingest::{IngestJob, MAX_BATCH};
use crate::sqlite::connect::{SQLITE_BUSY_TIMEOUT, SQLITE_PRAGMAS};
use crate::{Result, Store, StoreError};

/// The writer's page cache, in KiB (SQLite's `cache_size` takes a negative number as KiB): four
/// times SQLite's 2 MB default. Fanned out, every batch writes index pages scattered over
/// every endpoint's entries (an endpoint's deliveries and attempts); with the default the
/// writer read 1.4 pages a delivery back from the WAL or the file (1,000 endpoints × 100
/// messages), with 8 MiB none. The pool's readers keep the default: a connection's cache is
/// dropped whenever another one has written, so theirs could not stay warm.
const WRITER_CACHE_KIB: i64 = -8192;

/// Opens the writer's connection: the settings of the sea-orm pool (see `connect`) and a larger
/// page cache ([`WRITER_CACHE_KIB`]).
pub(crate) fn open(file: &Path) -> Result<Connection> {
    let conn = Connection::open(file)?;
    conn.busy_timeout(SQLITE_BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    for (name, value) in SQLITE_PRAGMAS {
        conn.pragma_update(None, name, value)?;
    }
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(32);
    conn.commit_hook(Some(crate::checkpoint::refuse_commit));
    Ok(conn)
}

/// A sea-query value bound to a rusqlite statement, as sqlx would bind it.
struct Bind<'a>(&'a Value);

impl ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::Value as V;
        let int = |v: Option<i64>| ToSqlOutput::Owned(v.map_or(V::Null, V::Integer));
        Ok(match self.0 {
            Value::Bool(v) => int(v.map(i64::from)),
            Value::TinyInt(v) => int(v.map(i64::from)),
            Value::SmallInt(v) => int(v.map(i64::from)),
            Value::Int(v) => int(v.map(i64::from)),
            Value::BigInt(v) => int(*v),
            Value::TinyUnsigned(v) => int(v.map(i64::from)),
            Value::SmallUnsigned(v) => int(v.map(i64::from)),
            Value::Unsigned(v) => int(v.map(i64::from)),
            Value::BigUnsigned(v) => match v.map(i64::try_from).transpose() {
                Ok(v) => int(v),
                Err(e) => return Err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))),
            },
            Value::Float(v) => ToSqlOutput::Owned(v.map_or(V::Null, |f| V::Real(f64::from(f)))),
            Value::Double(v) => ToSqlOutput::Owned(v.map_or(V::Null, V::Real)),
            Value::String(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Char(Some(c)) => ToSqlOutput::Owned(V::Text(c.to_string())),
            Value::Bytes(Some(b)) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Value::Json(Some(j)) => ToSqlOutput::Owned(V::Text(j.to_string())),
            // An id: its 16 bytes, as sqlx binds a Uuid (decisions 94).
            Value::Uuid(Some(u)) => ToSqlOutput::Borrowed(ValueRef::Blob(u.as_bytes())),
            Value::String(None)
            | Value::Char(None)
            | Value::Bytes(None)
            | Value::Json(None)
            | Value::Uuid(None) => ToSqlOutput::Owned(V::Null),
            other => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    format!("no SQLite binding for {other:?}").into(),
                ));
            }
        })
    }
}

/// Prepares (from the connection's cache) and binds a statement built for SQLite.
fn prepare<'c>(conn: &'c Connection, stmt: &Statement) -> Result<rusqlite::CachedStatement<'c>> {
    debug_assert_eq!(stmt.db_backend, DbBackend::Sqlite);
    let values = stmt.values.as_ref().map_or(&[][..], |v| &v.0[..]);
    prepare_values(conn, &stmt.sql, values)
}

/// Prepares `sql` (from the connection's cache) and binds `values` to its parameters in order.
fn prepare_values<'c>(
    conn: &'c Connection,
    sql: &str,
    values: &[Value],
) -> Result<rusqlite::CachedStatement<'c>> {
    let mut prepared = conn.prepare_cached(sql)?;
    for (i, v) in values.iter().enumerate() {
        prepared.raw_bind_parameter(i + 1, Bind(v))?;
    }
    Ok(prepared)
}

/// Runs `sql` with `values` bound (see [`Bind`]); returns the rows changed.
pub(crate) fn execute_values(conn: &Connection, sql: &str, values: &[Value]) -> Result<usize> {
    Ok(prepare_values(conn, sql, values)?.raw_execute()?)
}

/// Runs a statement and collects its first column as text (the binding test's probe).
#[cfg(test)]
fn query_texts(conn: &Connection, stmt: &Statement) -> Result<Vec<String>> {
    query_rows(conn, stmt, |r| r.row.get(0))
}

/// Runs a statement and returns its first row's first column as an integer.
pub(crate) fn query_i64(conn: &Connection, stmt: &Statement) -> Result<i64> {
    let mut prepared = prepare(conn, stmt)?;
    let mut rows = prepared.raw_query();
    match rows.next()? {
        Some(row) => Ok(row.get(0)?),
        None => Err(StoreError::Corrupt(format!(
            "expected a row from {}",
            stmt.sql
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ))),
    }
}

/// A row read by column name. rusqlite's own lookup by name asks SQLite for each column's name
/// and compares it, column after column, at every read: a claimed row's 19 reads spent 2.7 µs
/// a delivery on it at 1,000 endpoints. The statement's names are read once per query here, and
/// each lookup starts where the last one ended, so a row read in its columns' order finds each
/// at the first compare (any order still works). A name the statement returns twice is found
/// at its first place, as rusqlite finds it.
struct Named<'a> {
    row: &'a rusqlite::Row<'a>,
    names: &'a [String],
    /// Every name differs from the others: a lookup may start anywhere.
    distinct: bool,
    next: std::cell::Cell<usize>,
}

impl Named<'_> {
    fn index(&self, name: &str) -> rusqlite::Result<usize> {
        let n = self.names.len();
        let start = if self.distinct { self.next.get() } else { 0 };
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| self.names[i].eq_ignore_ascii_case(name))
            .inspect(|i| self.next.set(i + 1))
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_owned()))
    }

    fn get<T: rusqlite::types::FromSql>(&self, name: &str) -> rusqlite::Result<T> {
        self.row.get(self.index(name)?)
    }

    /// A text column holding one of the domain's enums; unknown text is an error naming the
    /// column, as sea-orm's decoding of the same column reports it.
    fn text_enum<T: std::str::FromStr>(&self, name: &str) -> rusqlite::Result<T>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        let idx = self.index(name)?;
        let text: String = self.row.get(idx)?;
        text.parse().map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
        })
    }
}

/// Runs a statement and turns each row it returns into a `T` with `row`.
fn query_rows<T>(
    conn: &Connection,
    stmt: &Statement,
    row: impl Fn(&Named<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut prepared = prepare(conn, stmt)?;
    let names: Vec<String> = prepared
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let distinct = names
        .iter()
        .enumerate()
        .all(|(i, a)| names[..i].iter().all(|b| !a.eq_ignore_ascii_case(b)));
    let mut rows = prepared.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let named = Named {
            row: r,
            names: &names,
            distinct,
            next: std::cell::Cell::new(0),
        };
        out.push(row(&named)?);
    }
    Ok(out)
}

/// Runs a `SELECT` of endpoint rows (built by sea-orm, so every column by name).
pub(crate) fn query_endpoints(conn: &Connection, stmt: &Statement) -> Result<Vec<endpoint::Model>> {
    query_rows(conn, stmt, |r| {
        Ok(endpoint::Model {
            id: r.get("id")?,
            tenant_id: r.get("tenant_id")?,
            app_id: r.get("app_id")?,
            uid: r.get("uid")?,
            url: r.get("url")?,
            description: r.get("description")?,
            version: r.get("version")?,
            filter_types: r.get("filter_types")?,
            channels: r.get("channels")?,
            headers: r.get("headers")?,
            metadata: r.get("metadata")?,
            disabled: r.get("disabled")?,
            disabled_reason: r.get("disabled_reason")?,
            disabled_at: r.get("disabled_at")?,
            throttle_rate: r.get("throttle_rate")?,
            max_concurrency: r.get("max_concurrency")?,
            timeout_ms: r.get("timeout_ms")?,
            retry_policy: r.get("retry_policy")?,
            status_overrides: r.get("status_overrides")?,
            signature_headers: r
                .get::<Option<String>>("signature_headers")?
                .map(|_| r.text_enum("signature_headers"))
                .transpose()?,
            auth: r.get("auth")?,
            mtls: r.get("mtls")?,
            failing_since: r.get("failing_since")?,
            last_success_at: r.get("last_success_at")?,
            warned_failing_since: r.get("warned_failing_since")?,
            breaker_state: r.text_enum("breaker_state")?,
            breaker_until: r.get("breaker_until")?,
            created_at: r.get("created_at")?,
            updated_at: r.get("updated_at")?,
            send_traceparent: r.get("send_traceparent")?,
        })
    })
}

/// Runs a statement returning whole delivery rows (every column by name), such as the claim.
pub(crate) fn query_deliveries(
    conn: &Connection,
    stmt: &Statement,
) -> Result<Vec<delivery::Model>> {
    query_rows(conn, stmt, |r| {
        Ok(delivery::Model {
            id: r.get("id")?,
            tenant_id: r.get("tenant_id")?,
            endpoint_id: r.get("endpoint_id")?,
            msg_id: r.get("msg_id")?,
            state: r.text_enum("state")?,
            attempt_count: r.get("attempt_count")?,
            attempts_at_arm: r.get("attempts_at_arm")?,
            next_trigger: r.text_enum("next_trigger")?,
            next_attempt_at: r.get("next_attempt_at")?,
            lease_owner: r.get("lease_owner")?,
            lease_expires_at: r.get("lease_expires_at")?,
            give_up_at: r.get("give_up_at")?,
            ordering_key: r.get("ordering_key")?,
            seq: r.get("seq")?,
            last_status: r.get("last_status")?,
            last_error: r.get("last_error")?,
            last_attempt_at: r.get("last_attempt_at")?,
            created_at: r.get("created_at")?,
            updated_at: r.get("updated_at")?,
        })
    })
}

/// Runs a `SELECT` of endpoint secret rows (built by sea-orm, so every column by name).
pub(crate) fn query_secrets(
    conn: &Connection,
    stmt: &Statement,
) -> Result<Vec<endpoint_secret::Model>> {
    query_rows(conn, stmt, |r| {
        Ok(endpoint_secret::Model {
            id: r.get("id")?,
            tenant_id: r.get("tenant_id")?,
            endpoint_id: r.get("endpoint_id")?,
            secret: r.get("secret")?,
            created_at: r.get("created_at")?,
            expires_at: r.get("expires_at")?,
        })
    })
}

/// `INSERT INTO <table> (<every column>) VALUES (?1, …)<suffix>` for one row of `E`, from the
/// entity's own column list, so it cannot drift from the schema sea-orm uses.
pub(crate) fn insert_sql<E: EntityTrait>(suffix: &str) -> String {
    let columns: Vec<String> = E::Column::iter()
        .map(|c| format!("\"{}\"", c.as_str()))
        .collect();
    format!(
        "INSERT INTO \"{}\" ({}) VALUES ({}){suffix}",
        E::default().table_name(),
        columns.join(", "),
        super::DIALECT.params(1, columns.len())
    )
}

/// Inserts one row of `E` with `sql` from [`insert_sql`]; returns the rows changed (0 when an
/// `ON CONFLICT DO NOTHING` skipped it). One prepared statement serves every row: SQLite runs
/// it again without parsing, where a multi-row INSERT was parsed anew for each batch size.
pub(crate) fn insert_row<E: EntityTrait>(
    conn: &Connection,
    sql: &str,
    row: &<E as EntityTrait>::Model,
) -> Result<usize> {
    let mut prepared = conn.prepare_cached(sql)?;
    for (i, column) in E::Column::iter().enumerate() {
        prepared.raw_bind_parameter(i + 1, Bind(&row.get(column)))?;
    }
    Ok(prepared.raw_execute()?)
}

/// Runs a prepared statement with positional parameters; returns the rows changed.
pub(crate) fn execute_params(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<usize> {
    Ok(conn.prepare_cached(sql)?.execute(params)?)
}

/// Begins a transaction that takes SQLite's write lock at once (`BEGIN IMMEDIATE`).
pub(crate) fn begin(conn: &mut Connection) -> Result<rusqlite::Transaction<'_>> {
    Ok(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?)
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// SQLite's hot writes have no other path than the writer thread: its absence is an error.
pub(crate) fn stopped() -> StoreError {
    StoreError::Corrupt("the SQLite writer thread is not running".into())
}

/// What the SQLite thread is asked to do.
pub(crate) enum Work {
    /// Create a message (group-committed with whatever else is waiting).
    Ingest(Box<IngestJob>),
    /// Run a closure, in a write turn, on the thread's connection.
    Run(Job),
}

/// The thread that owns the hot path's connection. One connection for both writes, because
/// a connection's page cache is dropped whenever another connection has written: two writers
/// taking turns would each start every transaction by reading its pages again. It ends (and
/// closes its connection) when the last handle is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Lite {
    tx: mpsc::Sender<Work>,
}

impl Lite {
    /// Starts the thread; `store` must not hold a `Lite` itself, or the thread would never see
    /// the channel close.
    pub(crate) fn start(store: Store, file: &Path) -> Result<Lite> {
        let conn = open(file)?;
        let (tx, rx) = mpsc::channel::<Work>(MAX_BATCH * 4);
        std::thread::Builder::new()
            .name("hookd-sqlite".into())
            .spawn(move || serve(store, conn, rx))
            .map_err(|e| StoreError::not_started("the SQLite thread", e))?;
        Ok(Lite { tx })
    }

    /// Runs `f` in a write turn on the thread's connection and returns what it returned. The
    /// caller must not hold a write turn: the thread takes it.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        self.tx.send(Work::Run(job)).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues a message to be created; gives the job back if the thread is gone.
    pub(crate) async fn ingest(&self, job: IngestJob) -> std::result::Result<(), IngestJob> {
        self.tx
            .send(Work::Ingest(Box::new(job)))
            .await
            .map_err(|e| match e.0 {
                Work::Ingest(job) => *job,
                Work::Run(_) => unreachable!("sent an ingest job"),
            })
    }

    pub(crate) fn downgrade(&self) -> mpsc::WeakSender<Work> {
        self.tx.downgrade()
    }
}

fn serve(store: Store, mut conn: Connection, mut rx: mpsc::Receiver<Work>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    let mut runs = Vec::new();
    while let Some(work) = rx.blocking_recv() {
        match work {
            Work::Ingest(job) => jobs.push(*job),
            Work::Run(job) => runs.push(job),
        }
        // This thread is outside any runtime, so it may block on the turn.
        let turn = store.write_gate.as_ref().map(|g| g.blocking_lock());
        // Whatever arrived while waiting for the turn is done in it: messages in one batch.
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(Work::Ingest(job)) => jobs.push(*job),
                Ok(Work::Run(job)) => runs.push(job),
                Err(_) => break,
            }
        }
        if !jobs.is_empty() {
            crate::sqlite::ingest::write_lite_batch(&store, &mut conn, std::mem::take(&mut jobs));
        }
        for job in runs.drain(..) {
            job(&mut conn);
        }
        drop(turn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::sea_query::Values;

    #[test]
    fn columns_are_found_by_name_in_any_order() {
        let conn = Connection::open_in_memory().unwrap();
        let stmt = Statement::from_string(
            DbBackend::Sqlite,
            "SELECT 1 AS a, 'two' AS b, 3 AS c UNION ALL SELECT 4, 'five', 6",
        );
        // In the statement's order, backwards and again: the same values either way.
        let read = |r: &Named<'_>| -> rusqlite::Result<_> {
            let forwards: (i64, String, i64) = (r.get("a")?, r.get("b")?, r.get("c")?);
            let backwards: (i64, String, i64) = (r.get("A")?, r.get("b")?, r.get("c")?);
            assert_eq!(r.get::<i64>("c")?, backwards.2);
            assert_eq!(r.get::<i64>("a")?, backwards.0);
            assert_eq!(forwards, backwards);
            Ok(forwards)
        };
        assert_eq!(
            query_rows(&conn, &stmt, read).unwrap(),
            vec![(1, "two".to_owned(), 3), (4, "five".to_owned(), 6)]
        );
        let missing = query_rows(&conn, &stmt, |r| r.get::<i64>("d")).unwrap_err();
        assert!(missing.to_string().contains("column name: d"), "{missing}");
        // A name returned twice is its first column's, whatever was read before it.
        let twice = Statement::from_string(DbBackend::Sqlite, "SELECT 1 AS a, 2 AS b, 3 AS a");
        let firsts = query_rows(&conn, &twice, |r| {
            Ok((r.get::<i64>("a")?, r.get::<i64>("b")?, r.get::<i64>("a")?))
        })
        .unwrap();
        assert_eq!(firsts, vec![(1, 2, 1)]);
    }

    #[test]
    fn values_bind_as_sqlx_binds_them() {
        let conn = Connection::open_in_memory().unwrap();
        let stmt = Statement {
            sql: "SELECT typeof(?1) || ',' || typeof(?2) || ',' || typeof(?3) || ',' || \
                  typeof(?4) || ',' || ?1 || ',' || ?3 || ',' || hex(?4)"
                .into(),
            values: Some(Values(vec![
                Value::Bool(Some(true)),
                Value::String(None),
                Value::BigInt(Some(-7)),
                Value::Bytes(Some(Box::new(vec![0xAB, 0x01]))),
            ])),
            db_backend: DbBackend::Sqlite,
        };
        assert_eq!(
            query_texts(&conn, &stmt).unwrap(),
            vec!["integer,null,integer,blob,1,-7,AB01".to_owned()]
        );
    }

    #[test]
    fn an_id_binds_as_its_16_bytes() {
        let conn = Connection::open_in_memory().unwrap();
        let id = domain::ids::MessageId::new();
        let stmt = Statement {
            sql: "SELECT typeof(?1) || ',' || hex(?1)".into(),
            values: Some(Values(vec![id.into()])),
            db_backend: DbBackend::Sqlite,
        };
        let hex: String = id.to_bytes().iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(
            query_texts(&conn, &stmt).unwrap(),
            vec![format!("blob,{hex}")]
        );
    }

    #[test]
    fn an_unsigned_too_large_for_sqlite_is_an_error_not_a_wrap() {
        let conn = Connection::open_in_memory().unwrap();
        let stmt = Statement {
            sql: "SELECT ?1".into(),
            values: Some(Values(vec![Value::BigUnsigned(Some(u64::MAX))])),
            db_backend: DbBackend::Sqlite,
        };
        assert!(query_texts(&conn, &stmt).is_err());
    }
}
