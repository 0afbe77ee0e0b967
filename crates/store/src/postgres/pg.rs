//! PostgreSQL-only helpers for writing several tables in one statement (one round trip, atomic
//! and durable when it returns) instead of a transaction of several (decisions 30).

use sea_orm::sea_query::{Value, ValueType};
use sea_orm::sqlx::postgres::PgArguments;
use sea_orm::{EntityTrait, IdenStatic, Iterable, ModelTrait, Statement};

/// One column of a batch of rows as a PostgreSQL array, sent in binary (issue 37 item 3): a
/// batch goes to PostgreSQL as one array per column and comes apart with `unnest`, where JSON
/// rows cost hookd their text and PostgreSQL their parse (about 10 µs a row in
/// `json_populate_recordset`), and every id travelled as 38 characters instead of 16 bytes.
pub(crate) enum ColumnArray {
    Uuid(Vec<Option<sea_orm::prelude::Uuid>>),
    Int(Vec<Option<i32>>),
    BigInt(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
    Bytes(Vec<Option<Vec<u8>>>),
    Bool(Vec<Option<bool>>),
}

impl ColumnArray {
    /// An empty array for a column of this type, room for `n` values.
    fn for_column(ty: &sea_orm::sea_query::ColumnType, n: usize) -> Self {
        use sea_orm::sea_query::ColumnType as T;
        match ty {
            T::Uuid => Self::Uuid(Vec::with_capacity(n)),
            T::TinyInteger | T::SmallInteger | T::Integer => Self::Int(Vec::with_capacity(n)),
            T::BigInteger => Self::BigInt(Vec::with_capacity(n)),
            T::Binary(_) | T::VarBinary(_) | T::Blob => Self::Bytes(Vec::with_capacity(n)),
            T::Boolean => Self::Bool(Vec::with_capacity(n)),
            _ => Self::Text(Vec::with_capacity(n)),
        }
    }

    /// This array with `values` appended, each of its type.
    pub(crate) fn filled<V: Into<Value>>(mut self, values: impl Iterator<Item = V>) -> Self {
        for v in values {
            self.push(v.into());
        }
        self
    }

    /// Appends `value`, which must be of the column's type (an entity's own value for it).
    fn push(&mut self, value: Value) {
        match (self, value) {
            (Self::Uuid(a), Value::Uuid(v)) => a.push(v.map(|u| *u)),
            (Self::Int(a), Value::TinyInt(v)) => a.push(v.map(i32::from)),
            (Self::Int(a), Value::SmallInt(v)) => a.push(v.map(i32::from)),
            (Self::Int(a), Value::Int(v)) => a.push(v),
            (Self::BigInt(a), Value::BigInt(v)) => a.push(v),
            (Self::Text(a), Value::String(v)) => a.push(v.map(|s| *s)),
            (Self::Bytes(a), Value::Bytes(v)) => a.push(v.map(|b| *b)),
            (Self::Bool(a), Value::Bool(v)) => a.push(v),
            (column, value) => unreachable!(
                "an entity's value {value:?} does not match its column type {}",
                column.sql_type()
            ),
        }
    }

    /// Its PostgreSQL type.
    fn sql_type(&self) -> &'static str {
        match self {
            Self::Uuid(_) => "uuid[]",
            Self::Int(_) => "int4[]",
            Self::BigInt(_) => "int8[]",
            Self::Text(_) => "text[]",
            Self::Bytes(_) => "bytea[]",
            Self::Bool(_) => "bool[]",
        }
    }

    pub(crate) fn bind(
        self,
        args: &mut PgArguments,
    ) -> Result<(), sea_orm::sqlx::error::BoxDynError> {
        use sea_orm::sqlx::Arguments;
        match self {
            Self::Uuid(a) => args.add(a),
            Self::Int(a) => args.add(a),
            Self::BigInt(a) => args.add(a),
            Self::Text(a) => args.add(a),
            Self::Bytes(a) => args.add(a),
            Self::Bool(a) => args.add(a),
        }
    }
}

/// Rows of `E`, one array per column in the entity's column order.
pub(crate) fn columns_of<'a, E: EntityTrait>(
    rows: impl ExactSizeIterator<Item = &'a E::Model>,
) -> Vec<ColumnArray>
where
    E::Model: 'a,
{
    use sea_orm::ColumnTrait;
    let n = rows.len();
    let columns: Vec<E::Column> = E::Column::iter().collect();
    let mut out: Vec<ColumnArray> = columns
        .iter()
        .map(|c| ColumnArray::for_column(c.def().get_column_type(), n))
        .collect();
    for row in rows {
        for (column, array) in columns.iter().zip(out.iter_mut()) {
            array.push(row.get(*column));
        }
    }
    out
}

/// `unnest(...)` of `arrays`, numbered as parameters from `$first`, under `alias` with the
/// column names `names`: a batch of rows to select from.
pub(crate) fn unnest(
    arrays: &[ColumnArray],
    first: usize,
    alias: &str,
    names: &[impl AsRef<str>],
) -> String {
    let params: Vec<String> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| format!("CAST(${} AS {})", first + i, a.sql_type()))
        .collect();
    format!(
        "unnest({}) AS {alias}({})",
        params.join(", "),
        names
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<&str>>()
            .join(", ")
    )
}

/// The column names of `E`, in its column order (that of [`columns_of`]).
pub(crate) fn column_names<E: EntityTrait>() -> Vec<String> {
    E::Column::iter().map(|c| c.as_str().to_owned()).collect()
}

/// Runs `sql` on PostgreSQL's pool with `values` as its first parameters and `arrays` after
/// them, in binary, and returns its rows as sea-orm reads them. Errors read as sea-orm's own.
pub(crate) async fn query_with_arrays(
    db: &sea_orm::DatabaseConnection,
    sql: &str,
    values: Vec<Value>,
    arrays: Vec<ColumnArray>,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    run(db, sql, values, arrays, true).await
}

/// [`query_with_arrays`] as an unnamed statement, planned for the tables as they are at each
/// run (see [`query_planned_now`] for why a kept plan can go stale).
pub(crate) async fn query_with_arrays_planned_now(
    db: &sea_orm::DatabaseConnection,
    sql: &str,
    values: Vec<Value>,
    arrays: Vec<ColumnArray>,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    run(db, sql, values, arrays, false).await
}

/// [`query_with_arrays`] for a statement that finds every row it reads by a key from its
/// arrays: prepared once per connection and planned once, with every table read through an
/// index ([`BY_KEY`]). A plan made on the tables' sizes of the moment and kept goes stale
/// (see [`query_planned_now`]); one that looks each row up by its key is right at any size.
/// Planning the result write at each batch cost PostgreSQL 0.33 ms a batch, 15 % of its CPU in
/// the wrk harness (pg_stat_statements, decisions 116). Three round trips (the settings, the
/// statement, the commit) where the unnamed statement took one.
pub(crate) async fn query_with_arrays_by_key(
    db: &sea_orm::DatabaseConnection,
    sql: &str,
    values: Vec<Value>,
    arrays: Vec<ColumnArray>,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    in_transaction(db, BY_KEY, sql, arguments(values, arrays)?, true).await
}

/// How [`query_with_arrays_by_key`] begins: no plan but lookups by key (sequential scans,
/// hash and merge joins priced out), made once and kept (`force_generic_plan`). Settings are
/// not part of a kept plan's identity, so the plan made under them is the one reused; each is
/// undone at the commit.
pub(crate) const BY_KEY: &str = "BEGIN; SET LOCAL enable_seqscan = off; \
     SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; \
     SET LOCAL plan_cache_mode = force_generic_plan";

/// Runs `stmt` as an unnamed statement, which PostgreSQL plans for each execution with its
/// values and the tables' sizes of the moment. A statement a connection keeps prepared gets,
/// after five runs, a generic plan that it keeps until the table's statistics change: the
/// claim's, made while `deliveries` was empty (a dispatcher polls from its start), scanned
/// the whole table and sorted it, and with 100,000 pending deliveries one claim ran for 36 s
/// and nothing was delivered meanwhile (autovacuum off, so no ANALYZE came to replace it).
///
/// It runs in a transaction of its own without bitmap scans ([`WALK_IN_ORDER`]): a claim takes
/// the oldest few hundred of a backlog, which only a walk of the index in its order reads
/// alone. Without statistics (autovacuum off, or a backlog that grew since the last ANALYZE)
/// PostgreSQL guesses a range of a pending index to hold a hundred rows, and reading that
/// range through a bitmap and sorting it looks cheaper: with 100,000 deliveries pending to
/// 1,000 endpoints each claim read and sorted all of them (54 ms a claim, 250 µs of
/// PostgreSQL's time per delivery claimed).
pub(crate) async fn query_planned_now(
    db: &sea_orm::DatabaseConnection,
    stmt: Statement,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    let values = stmt.values.map(|v| v.0).unwrap_or_default();
    let args = arguments(values, Vec::new())?;
    in_transaction(db, WALK_IN_ORDER, &stmt.sql, args, false).await
}

/// How [`query_planned_now`] begins: one round trip, the setting undone at the commit.
const WALK_IN_ORDER: &str = "BEGIN; SET LOCAL enable_bitmapscan = off";

/// Runs `sql` in a transaction begun with `begin` (which sets what it plans with) on the pool.
async fn in_transaction(
    db: &sea_orm::DatabaseConnection,
    begin: &'static str,
    sql: &str,
    args: PgArguments,
    persistent: bool,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    let mut tx = db
        .get_postgres_connection_pool()
        .begin_with(begin)
        .await
        .map_err(sqlx_error)?;
    let rows = sea_orm::sqlx::query_with(sql, args)
        .persistent(persistent)
        .fetch_all(&mut *tx)
        .await
        .map_err(sqlx_error)?;
    tx.commit().await.map_err(sqlx_error)?;
    Ok(rows.into_iter().map(sea_orm::QueryResult::from).collect())
}

fn sqlx_error(e: sea_orm::sqlx::Error) -> sea_orm::DbErr {
    sea_orm::DbErr::Query(sea_orm::RuntimeErr::SqlxError(e))
}

/// `values` then `arrays` (in binary) as one statement's parameters.
fn arguments(values: Vec<Value>, arrays: Vec<ColumnArray>) -> Result<PgArguments, sea_orm::DbErr> {
    use sea_orm::sqlx::IntoArguments;
    let mut args = <_ as IntoArguments<'_, sea_orm::sqlx::Postgres>>::into_arguments(
        sea_query_binder::SqlxValues(sea_orm::sea_query::Values(values)),
    );
    for array in arrays {
        array
            .bind(&mut args)
            .map_err(|e| sea_orm::DbErr::Type(e.to_string()))?;
    }
    Ok(args)
}

async fn run(
    db: &sea_orm::DatabaseConnection,
    sql: &str,
    values: Vec<Value>,
    arrays: Vec<ColumnArray>,
    persistent: bool,
) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
    sea_orm::sqlx::query_with(sql, arguments(values, arrays)?)
        .persistent(persistent)
        .fetch_all(db.get_postgres_connection_pool())
        .await
        .map(|rows| rows.into_iter().map(sea_orm::QueryResult::from).collect())
        .map_err(sqlx_error)
}

/// The id whose stored `uuid` PostgreSQL wrote as `text` (`json_agg` of a `uuid` column).
pub(crate) fn id_from_uuid_text<I: ValueType>(text: &str) -> Result<I, String> {
    let uuid = sea_orm::prelude::Uuid::parse_str(text).map_err(|e| format!("{text:?}: {e}"))?;
    I::try_from(Value::Uuid(Some(Box::new(uuid)))).map_err(|_| format!("{text:?}: not an id"))
}

/// Deserializes an id from a JSON text written by PostgreSQL from a `uuid` column:
/// `#[serde(deserialize_with = "crate::pg::uuid_id")]`.
pub(crate) fn uuid_id<'de, D, I>(d: D) -> Result<I, D::Error>
where
    D: serde::Deserializer<'de>,
    I: ValueType,
{
    let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    id_from_uuid_text(&text).map_err(serde::de::Error::custom)
}
