//! PostgreSQL-only helpers for writing several tables in one statement (one round trip, atomic
//! and durable when it returns) instead of a transaction of several (decisions 30).

use sea_orm::sea_query::{Value, ValueType};
use sea_orm::{DbBackend, EntityTrait, IdenStatic, Iterable, ModelTrait, Statement};

/// A row as a JSON object keyed by column name, for `json_populate_recordset(NULL::table, …)`.
/// Only for tables of text, integer and id columns, which JSON carries exactly (an id as the
/// text of its `uuid`).
pub(crate) fn row_json<E: EntityTrait>(row: &E::Model) -> serde_json::Value {
    let mut map = serde_json::Map::with_capacity(24);
    for column in E::Column::iter() {
        let value = sea_orm::sea_query::sea_value_to_json_value(&row.get(column));
        map.insert(column.as_str().to_owned(), value);
    }
    serde_json::Value::Object(map)
}

/// Rows of `E` as one JSON array parameter.
pub(crate) fn rows_param<'a, E: EntityTrait>(rows: impl Iterator<Item = &'a E::Model>) -> Value
where
    E::Model: 'a,
{
    serde_json::Value::Array(rows.map(row_json::<E>).collect())
        .to_string()
        .into()
}

/// An id as the text of the PostgreSQL `uuid` it is stored as, for JSON and array parameters
/// that PostgreSQL reads into `uuid` columns (`json_populate_recordset` does the same with the
/// JSON `sea_value_to_json_value` writes for a [`Value::Uuid`]).
pub(crate) fn uuid_text(id: impl Into<Value>) -> String {
    match id.into() {
        Value::Uuid(Some(u)) => u.to_string(),
        other => unreachable!("ids are stored as uuid values, not {other:?}"),
    }
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

/// A PostgreSQL array literal of `items` (`{"a","b"}`), to be cast to an array type (`uuid[]`).
pub(crate) fn text_array(items: impl Iterator<Item = impl AsRef<str>>) -> String {
    let mut out = String::from("{");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in item.as_ref().chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// One statement out of `parts` and `last`: every part becomes a CTE (`s0`, `s1`, …) run with
/// `last`, which may refer to them. Each statement numbers its parameters from `$1`; they are
/// renumbered to follow one another.
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
    sql.push(' ');
    sql.push_str(&shift_params(&last.sql, values.len()));
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
    fn array_literals_quote_every_item() {
        assert_eq!(
            text_array(["a", "b,c", r#"d"e\f"#].into_iter()),
            r#"{"a","b,c","d\"e\\f"}"#
        );
        assert_eq!(text_array(std::iter::empty::<&str>()), "{}");
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
    }
}
