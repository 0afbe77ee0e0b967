//! Every typed id stored as its 16 bytes instead of its 30-character text (decisions 94): the
//! ULID's 128-bit value big-endian, so byte order is id order is time order.
//! PostgreSQL: a `uuid` column; SQLite: a BLOB in the same (TEXT-declared) column, since SQLite
//! columns keep their declared type and a BLOB stays a BLOB there.
//!
//! A database made before it has text ids (`tnt_01J…`) in these columns: each is decoded in
//! place (the Crockford base32 after the prefix), by SQL written out below, on both databases.
//! A new database takes the same path (its tables are created with text columns by m0001…m0029
//! and converted here while empty). A value that is not an id of the column's type stops the
//! migration with an error naming the table, column and value: nothing is dropped or guessed.
//! Columns holding ids as plain text by design (JSON documents, `lease_owner`, node ids,
//! `payload_expunged_before`, a portal token's `session_id`) stay text.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0030_binary_ids"
    }
}

/// Each table's id columns and the prefix of the ids each holds.
pub const ID_COLUMNS: &[(&str, &[(&str, &str)])] = &[
    ("tenants", &[("id", "tnt_")]),
    ("users", &[("id", "usr_"), ("tenant_id", "tnt_")]),
    (
        "sessions",
        &[("id", "sess_"), ("tenant_id", "tnt_"), ("user_id", "usr_")],
    ),
    ("api_keys", &[("id", "key_"), ("tenant_id", "tnt_")]),
    ("applications", &[("id", "app_"), ("tenant_id", "tnt_")]),
    ("event_types", &[("id", "evtype_"), ("tenant_id", "tnt_")]),
    (
        "endpoints",
        &[("id", "ep_"), ("tenant_id", "tnt_"), ("app_id", "app_")],
    ),
    (
        "endpoint_secrets",
        &[
            ("id", "whsk_"),
            ("tenant_id", "tnt_"),
            ("endpoint_id", "ep_"),
        ],
    ),
    (
        "messages",
        &[("id", "msg_"), ("tenant_id", "tnt_"), ("app_id", "app_")],
    ),
    (
        "deliveries",
        &[
            ("id", "dlv_"),
            ("tenant_id", "tnt_"),
            ("app_id", "app_"),
            ("endpoint_id", "ep_"),
            ("msg_id", "msg_"),
        ],
    ),
    (
        "ordering_sequences",
        &[("endpoint_id", "ep_"), ("tenant_id", "tnt_")],
    ),
    (
        "attempts",
        &[
            ("id", "atmpt_"),
            ("tenant_id", "tnt_"),
            ("app_id", "app_"),
            ("endpoint_id", "ep_"),
            ("msg_id", "msg_"),
            ("delivery_id", "dlv_"),
        ],
    ),
    (
        "attempt_stats",
        &[
            ("tenant_id", "tnt_"),
            ("app_id", "app_"),
            ("endpoint_id", "ep_"),
        ],
    ),
    ("idempotency_keys", &[("tenant_id", "tnt_")]),
    ("jobs", &[("id", "job_"), ("tenant_id", "tnt_")]),
    ("email_outbox", &[("id", "eml_"), ("tenant_id", "tnt_")]),
    (
        "operational_events",
        &[
            ("id", "oev_"),
            ("tenant_id", "tnt_"),
            ("app_id", "app_"),
            ("endpoint_id", "ep_"),
        ],
    ),
    (
        "portal_tokens",
        &[("id", "ptk_"), ("tenant_id", "tnt_"), ("app_id", "app_")],
    ),
    ("egress_grants", &[("tenant_id", "tnt_")]),
    ("endpoint_leases", &[("endpoint_id", "ep_")]),
    (
        "inbound_sources",
        &[("id", "src_"), ("tenant_id", "tnt_"), ("app_id", "app_")],
    ),
    (
        "inbound_refusals",
        &[("id", "rfs_"), ("source_id", "src_"), ("tenant_id", "tnt_")],
    ),
    (
        "inbound_keys",
        &[("source_id", "src_"), ("tenant_id", "tnt_")],
    ),
    (
        "inbound_held",
        &[("source_id", "src_"), ("tenant_id", "tnt_")],
    ),
    (
        "inbound_signed",
        &[("source_id", "src_"), ("tenant_id", "tnt_")],
    ),
    (
        "integrations",
        &[("id", "integ_"), ("tenant_id", "tnt_"), ("app_id", "app_")],
    ),
];

/// Crockford's base32 alphabet, in digit order.
const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// SQL taking `body` (an expression: the 26 upper-case characters after the prefix) to the
/// 32 hex digits of its 128-bit value. 26 × 5 = 130 bits, the top two zero: the first two
/// characters give the first byte and each following eight characters (40 bits) five more,
/// which fit the 64-bit integers of both databases. Public for the store's test that holds
/// it to the domain's decoding.
pub fn hex_of(backend: DbBackend, body: &str) -> String {
    let digit = |i: usize| match backend {
        DbBackend::Postgres => {
            format!("(strpos('{ALPHABET}', substr({body}, {i}, 1))::bigint - 1)")
        }
        _ => format!("(instr('{ALPHABET}', substr({body}, {i}, 1)) - 1)"),
    };
    let group = |from: usize, len: usize| -> String {
        (0..len)
            .map(|k| {
                let shift = 5 * (len - 1 - k);
                if shift == 0 {
                    digit(from + k)
                } else {
                    format!("{} * {}", digit(from + k), 1i64 << shift)
                }
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let groups = [group(1, 2), group(3, 8), group(11, 8), group(19, 8)];
    match backend {
        DbBackend::Postgres => format!(
            "lpad(to_hex({}), 2, '0') || lpad(to_hex({}), 10, '0') || \
             lpad(to_hex({}), 10, '0') || lpad(to_hex({}), 10, '0')",
            groups[0], groups[1], groups[2], groups[3]
        ),
        _ => format!(
            "printf('%02X%010X%010X%010X', {}, {}, {}, {})",
            groups[0], groups[1], groups[2], groups[3]
        ),
    }
}

/// SQL true where `column` holds an id with `prefix` in its text form: the prefix, then 26
/// base32 characters (either case, as ids parse) of which the first is at most 7 (the text
/// of a 128-bit value).
fn is_text_id(backend: DbBackend, column: &str, prefix: &str) -> String {
    let n = prefix.len();
    match backend {
        DbBackend::Postgres => format!(
            "(substr({column}, 1, {n}) = '{prefix}' AND \
             upper(substr({column}, {from})) ~ '^[0-7][0-9A-HJKMNP-TV-Z]{{25}}$')",
            from = n + 1
        ),
        _ => format!(
            "(typeof({column}) = 'text' AND length({column}) = {len} AND \
             substr({column}, 1, {n}) = '{prefix}' AND \
             upper(substr({column}, {from})) GLOB '[0-7][0-9A-HJKMNP-TV-Z]*' AND \
             NOT upper(substr({column}, {from})) GLOB '*[^0-9A-HJKMNP-TV-Z]*')",
            len = n + 26,
            from = n + 1
        ),
    }
}

/// Stops with the first value of `table.column` that is not an id with `prefix`.
async fn check_column<C: ConnectionTrait>(
    db: &C,
    table: &str,
    column: &str,
    prefix: &str,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let sql = format!(
        "SELECT CAST({column} AS text) AS v FROM {table} \
         WHERE {column} IS NOT NULL AND NOT {} LIMIT 1",
        is_text_id(backend, column, prefix)
    );
    if let Some(row) = db.query_one(Statement::from_string(backend, sql)).await? {
        let value: String = row.try_get("", "v").unwrap_or_else(|e| format!("<{e}>"));
        return Err(DbErr::Migration(format!(
            "m0030_binary_ids: {table}.{column} holds {value:?}, which is not an id \
             starting with {prefix:?} followed by 26 base32 characters; nothing was converted"
        )));
    }
    Ok(())
}

async fn up_postgres<C: ConnectionTrait>(db: &C) -> Result<(), DbErr> {
    let backend = DbBackend::Postgres;
    let body = "upper(substr(t, length(p) + 1))";
    db.execute_unprepared(&format!(
        "CREATE FUNCTION hookd_m0030_id(t text, p text) RETURNS uuid \
         LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT CAST({} AS uuid) $$",
        hex_of(backend, body)
    ))
    .await?;
    // The foreign keys between converted columns cannot hold while one side is text and the
    // other uuid: each is dropped and added back as it was.
    let fks = db
        .query_all(Statement::from_string(
            backend,
            "SELECT c.conrelid::regclass::text AS t, c.conname AS n, \
               pg_get_constraintdef(c.oid) AS d \
             FROM pg_constraint c JOIN pg_namespace s ON s.oid = c.connamespace \
             WHERE c.contype = 'f' AND s.nspname = current_schema() ORDER BY 1, 2",
        ))
        .await?;
    let mut fk_defs = Vec::with_capacity(fks.len());
    for fk in &fks {
        let (t, n, d): (String, String, String) = (
            fk.try_get("", "t")?,
            fk.try_get("", "n")?,
            fk.try_get("", "d")?,
        );
        db.execute_unprepared(&format!("ALTER TABLE {t} DROP CONSTRAINT \"{n}\""))
            .await?;
        fk_defs.push((t, n, d));
    }
    for (table, columns) in ID_COLUMNS {
        for (column, prefix) in *columns {
            check_column(db, table, column, prefix).await?;
        }
        // One statement per table: one rewrite of it and its indexes.
        let alters: Vec<String> = columns
            .iter()
            .map(|(column, prefix)| {
                format!(
                    "ALTER COLUMN {column} TYPE uuid USING hookd_m0030_id({column}, '{prefix}')"
                )
            })
            .collect();
        db.execute_unprepared(&format!("ALTER TABLE {table} {}", alters.join(", ")))
            .await?;
    }
    for (t, n, d) in fk_defs {
        db.execute_unprepared(&format!("ALTER TABLE {t} ADD CONSTRAINT \"{n}\" {d}"))
            .await?;
    }
    db.execute_unprepared("DROP FUNCTION hookd_m0030_id(text, text)")
        .await?;
    Ok(())
}

async fn up_sqlite<C: ConnectionTrait>(db: &C) -> Result<(), DbErr> {
    let backend = DbBackend::Sqlite;
    // Parents and children are rewritten one table at a time: the foreign keys are checked
    // once, at the commit, when both sides hold the same bytes again.
    db.execute_unprepared("PRAGMA defer_foreign_keys = ON")
        .await?;
    for (table, columns) in ID_COLUMNS {
        for (column, prefix) in *columns {
            check_column(db, table, column, prefix).await?;
        }
        let sets: Vec<String> = columns
            .iter()
            .map(|(column, prefix)| {
                let body = format!("upper(substr({column}, {}))", prefix.len() + 1);
                format!(
                    "{column} = CASE WHEN typeof({column}) = 'text' \
                     THEN unhex({}) ELSE {column} END",
                    hex_of(backend, &body)
                )
            })
            .collect();
        db.execute_unprepared(&format!("UPDATE {table} SET {}", sets.join(", ")))
            .await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // In a transaction of its own on SQLite (sea-orm's migrator runs none there; on
        // PostgreSQL this is a savepoint within its): all converted, or nothing.
        let txn = m.get_connection().begin().await?;
        match txn.get_database_backend() {
            DbBackend::Postgres => up_postgres(&txn).await?,
            _ => up_sqlite(&txn).await?,
        }
        txn.commit().await
    }

    async fn down(&self, _: &SchemaManager) -> Result<(), DbErr> {
        Err(DbErr::Migration(
            "m0030_binary_ids is not undone: restore the backup taken before the upgrade".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_is_five_bits_a_character() {
        let sql = hex_of(DbBackend::Sqlite, "b");
        assert!(sql.starts_with("printf('%02X%010X%010X%010X', (instr("));
        // The last character of each 8-character group is its ones.
        assert!(sql.contains("substr(b, 10, 1)) - 1), (instr("));
        assert!(sql.contains(&format!("* {}", 1i64 << 35)));
    }
}
