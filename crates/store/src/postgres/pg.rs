//! PostgreSQL-only helpers for writing several tables in one statement (one round trip, atomic
//! and durable when it returns) instead of a transaction of several (decisions 30).

use sea_orm::sea_query::{Value, ValueType};
use sea_orm::sqlx::postgres::PgArguments;
use sea_orm::{DbBackend, EntityTrait, IdenStatic, Iterable, ModelTrait, Statement};

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
    let mut tx = db
        .get_postgres_connection_pool()
        .begin_with(WALK_IN_ORDER)
        .await
        .map_err(sqlx_error)?;
    let rows = sea_orm::sqlx::query_with(&stmt.sql, args)
        .persistent(false)
        .fetch_all(&mut *tx)
        .await
        .map_err(sqlx_error)?;
    tx.commit().await.map_err(sqlx_error)?;
    Ok(rows.into_iter().map(sea_orm::QueryResult::from).collect())
}

/// How [`query_planned_now`] begins: one round trip, the setting undone at the commit.
const WALK_IN_ORDER: &str = "BEGIN; SET LOCAL enable_bitmapscan = off";

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

/// One statement out of `parts` and `last`: every part becomes a CTE (`s0`, `s1`, …) run with
/// `last`, which may refer to them (and may begin with CTEs of its own). Each statement numbers
/// its parameters from `$1`; they are renumbered to follow one another, so parameters numbered
/// past `last`'s own values come after every value.
pub(crate) fn with_ctes(parts: Vec<Statement>, last: Statement) -> Statement {
    let mut sql = String::new();
    let mut values = Vec::new();
    for (i, part) in parts.into_iter().enumerate() {
        sql.push_str(if i == 0 { "WITH " } else { ", " });
        sql.push_str(&format!("s{i} AS ("));
        sql.push_str(&shift_params(&part.sql, values.len()));
        sql.push(')');
        values.extend(part.values.map(|v| v.0).unwrap_or_default());
    }
    let last_sql = shift_params(&last.sql, values.len());
    // A `last` with CTEs of its own joins them to this list.
    match last_sql.strip_prefix("WITH ") {
        Some(ctes) if !sql.is_empty() => {
            sql.push_str(", ");
            sql.push_str(ctes);
        }
        _ => {
            if !sql.is_empty() {
                sql.push(' ');
            }
            sql.push_str(&last_sql);
        }
    }
    values.extend(last.values.map(|v| v.0).unwrap_or_default());
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// `sql` with every parameter `$n` outside quotes written as `$(n + by)`.
pub(crate) fn shift_params(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut n = 0usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n * 10 + d as usize;
                    chars.next();
                }
                out.push_str(&format!("${}", n + by));
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renumbered_outside_quotes_only() {
        assert_eq!(
            shift_params(r#"UPDATE "t$1" SET a = $1, b = '$2', c = $12"#, 3),
            r#"UPDATE "t$1" SET a = $4, b = '$2', c = $15"#
        );
        assert_eq!(shift_params("SELECT $1", 0), "SELECT $1");
    }

    #[test]
    fn parts_become_ctes_with_their_values_in_order() {
        let part =
            |sql: &str, v: Vec<Value>| Statement::from_sql_and_values(DbBackend::Postgres, sql, v);
        let s = with_ctes(
            vec![
                part("INSERT INTO a VALUES ($1, $2)", vec![1.into(), 2.into()]),
                part("UPDATE b SET x = $1", vec![3.into()]),
            ],
            part("SELECT $1 AS y", vec![4.into()]),
        );
        assert_eq!(
            s.sql,
            "WITH s0 AS (INSERT INTO a VALUES ($1, $2)), s1 AS (UPDATE b SET x = $3) SELECT $4 AS y"
        );
        let values: Vec<Value> = s.values.unwrap().0;
        assert_eq!(values, vec![1.into(), 2.into(), 3.into(), 4.into()]);
        let s = with_ctes(
            vec![part("UPDATE b SET x = $1", vec![3.into()])],
            part("WITH a AS (SELECT $2) SELECT $1 AS y", vec![4.into()]),
        );
        assert_eq!(
            s.sql,
            "WITH s0 AS (UPDATE b SET x = $1), a AS (SELECT $3) SELECT $2 AS y"
        );
        let alone = with_ctes(vec![], part("WITH a AS (SELECT $1) SELECT 1", vec![]));
        assert_eq!(alone.sql, "WITH a AS (SELECT $1) SELECT 1");
    }
}
