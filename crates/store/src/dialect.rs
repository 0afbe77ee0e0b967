//! What differs between SQLite and PostgreSQL, written once per database (issue 37, decisions
//! 96). The store picks one [`Dialect`] when it connects and keeps it; shared code reads its
//! statements and properties from there and never asks which database it runs on. Everything
//! else the store writes is built with sea-query, which renders it for the same database.
//!
//! A table of statements rather than a trait: the differences are texts and a few flags, the
//! callers are async, and a table costs one pointer read where a boxed async trait method would
//! cost an allocation per call on the claim and result paths.

use domain::ids::{ApplicationId, MessageId};
use sea_orm::DbBackend;
use sea_orm::sea_query::SimpleExpr;

/// The statements and properties of one database. Parameters are numbered (`?n` on SQLite,
/// `$n` on PostgreSQL); each text says what it binds.
pub(crate) struct Dialect {
    /// How sea-query renders the shared statements, and how raw ones are tagged.
    pub db: DbBackend,
    /// Parameter `n` of a statement assembled from parts (a list, rows of values).
    pub param: fn(usize) -> String,
    /// The claim of pending deliveries: `?1` owner, `?2` lease until, `?3`/`?4` now, `?5`
    /// limit; with `fresh` (a claim of new work skipping that many endpoints) `?6` created
    /// since and the endpoints from `?7`.
    pub claim: fn(fresh: Option<usize>) -> String,
    /// Extends claimed deliveries' leases: `?1` until, `?2` owner, `{ids}` the list of ids.
    pub renew_leases: &'static str,
    /// Moves an endpoint's due backlog later: `?1` until, `?2` endpoint.
    pub defer_backlog: &'static str,
    /// The ids of an endpoint's pending and in-flight deliveries, found through the queue's
    /// partial indexes rather than the endpoint's whole history (m0031), as a sea-query custom
    /// expression writes parameters (`?` on SQLite, `$n` on PostgreSQL): the endpoint twice.
    pub open_of_endpoint: &'static str,
    /// Deletes per-minute statistics before `?1`.
    pub prune_attempt_stats: &'static str,
    /// The database's size in bytes (`total`) and the part of it free for reuse (`free`).
    pub database_size: &'static str,
    /// A write that fails while the database cannot take writes (run in a transaction that
    /// is rolled back).
    pub probe: &'static [&'static str],
    /// The first statement of a write transaction, where one is needed to take the write
    /// lock at once (see `Store::write_txn_in`).
    pub begin_write: Option<&'static str>,
    /// How to ask for a plan: the prefix, and the column of its lines.
    pub explain: (&'static str, &'static str),
    /// Whether a manual action share-locks the endpoint row it checks (see `gate`); without
    /// it the write transaction already excludes every other writer.
    pub lock_endpoint_row: bool,
    /// Several dispatcher processes on one database: the statements of their endpoint leases.
    pub endpoint_leases: Option<EndpointLeases>,
    /// Gives the database's write-ahead log file back to a full disk, where it keeps one of
    /// its own beside hookd (see `checkpoint`).
    pub give_back_wal: Option<&'static str>,
    /// Whether the database may need hookd to reclaim deleted rows' space (see `retention`).
    pub may_need_vacuum: bool,
    /// An id as an SQL literal of its stored form (decisions 94).
    pub id_literal: fn(&sea_orm::prelude::Uuid) -> String,
    /// The messages of these `(app_id, id)` pairs, each read by its key whatever the planner
    /// knows of the table (see [`Dialect::messages_of`]).
    pub message_keys: fn(&[(ApplicationId, MessageId)]) -> SimpleExpr,
    /// Which storage fault an error this database raised means, by its own codes; `None`
    /// for an error of another database (see `database_fault` in lib.rs).
    pub database_fault: fn(
        &(dyn sea_orm::sqlx::error::DatabaseError + 'static),
    ) -> Option<crate::error::StorageFault>,
}

impl Dialect {
    /// Messages `ids` of application `app`, by their key (`(app_id, id)` on PostgreSQL since
    /// m0037): a claimed batch's, a page's, a retention batch's.
    pub(crate) fn messages_of(&self, app: ApplicationId, ids: &[MessageId]) -> SimpleExpr {
        let keys: Vec<(ApplicationId, MessageId)> = ids.iter().map(|m| (app, *m)).collect();
        (self.message_keys)(&keys)
    }
}

/// `(app_id = ? AND id IN (…)) OR …`, one term per application: what SQLite reads as a probe
/// of `idx_messages_app` for each message.
pub(crate) fn message_keys_by_app(keys: &[(ApplicationId, MessageId)]) -> SimpleExpr {
    use crate::entities::message;
    use sea_orm::ColumnTrait;
    let mut by_app: std::collections::BTreeMap<ApplicationId, Vec<MessageId>> = Default::default();
    for (app, id) in keys {
        by_app.entry(*app).or_default().push(*id);
    }
    let mut any = sea_orm::Condition::any();
    for (app, ids) in by_app {
        any = any.add(
            message::Column::AppId
                .eq(app)
                .and(message::Column::Id.is_in(ids)),
        );
    }
    any.into()
}

/// Endpoint leases (PostgreSQL: several dispatcher processes; see `queue`).
pub(crate) struct EndpointLeases {
    /// `?1` until, `?2` owner, `{ids}` the endpoints: returns those still held.
    pub renew: &'static str,
    /// Gives up every lease of owner `?1`.
    pub release: &'static str,
    /// Removes leases that expired before `?1`.
    pub forget_expired: &'static str,
}

impl std::fmt::Debug for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dialect({:?})", self.db)
    }
}

impl Dialect {
    /// `n` parameters from `first` on, comma-separated: an `IN` list.
    pub(crate) fn params(&self, first: usize, n: usize) -> String {
        (first..first + n)
            .map(self.param)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A statement of this database with its values.
    pub(crate) fn statement(
        &self,
        sql: impl Into<String>,
        values: impl IntoIterator<Item = sea_orm::Value>,
    ) -> sea_orm::Statement {
        sea_orm::Statement::from_sql_and_values(self.db, sql, values)
    }
}

/// Ids bound in one `IN (…)` list: well under every database's limit on a statement's bound
/// parameters (SQLite 32,766, PostgreSQL 65,535); longer lists go in chunks of this many.
pub(crate) const IDS_PER_STATEMENT: usize = 1000;

/// The columns a claim returns: every column of `deliveries`, by name. Not `RETURNING *`: a
/// connection keeps each statement prepared with the columns `*` stood for then, and after a
/// column is dropped (m0033) under it (a migration run by another connection) the names it
/// kept no longer line up with the values (a claim read `msg_id` from `state`).
pub(crate) fn delivery_columns() -> &'static str {
    use sea_orm::{IdenStatic, Iterable};
    static COLUMNS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    COLUMNS.get_or_init(|| {
        crate::entities::delivery::Column::iter()
            .map(|c| format!("\"{}\"", c.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The part of the claim both databases share: a delivery whose ordering key has an earlier
/// one still unfinished waits for it.
pub(crate) const ORDERED: &str = "(d.seq IS NULL OR NOT EXISTS ( \
       SELECT 1 FROM deliveries p \
       WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key \
         AND p.seq < d.seq AND p.state IN ('pending', 'sending', 'failed', 'paused')))";

/// The claim's window and order. Fresh: due deliveries created in the last few seconds (new
/// messages), oldest of them first, so that new messages never wait behind another tenant's
/// or endpoint's backlog, however often that backlog is deferred and comes due again.
/// Otherwise oldest due first.
pub(crate) fn claim_window(d: &Dialect, fresh: Option<usize>) -> (String, &'static str) {
    match fresh {
        Some(0) => (
            format!(" AND d.created_at >= {}", (d.param)(6)),
            "d.created_at",
        ),
        Some(skip) => (
            format!(
                " AND d.created_at >= {} AND d.endpoint_id NOT IN ({})",
                (d.param)(6),
                d.params(7, skip)
            ),
            "d.created_at",
        ),
        None => (String::new(), "d.next_attempt_at"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// Each top-level module of the store (a file, or a directory with `mod.rs`) and its
    /// source, tests left out.
    fn modules() -> BTreeMap<String, String> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let rel = path.strip_prefix(&src).unwrap();
                let top = rel.components().next().unwrap().as_os_str();
                let name = top.to_string_lossy().trim_end_matches(".rs").to_owned();
                if name == "lib" {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
                out.entry(name).or_default().push_str(&code);
            }
        }
        out
    }

    /// The modules `code` names through `crate::` paths, `use crate::{…}` groups included.
    fn imports(code: &str, names: &BTreeSet<String>) -> BTreeSet<String> {
        // `lib.rs` re-exports these implementation modules under their old names.
        let alias = |n: &str| match n {
            "lite" | "checkpoint" => "sqlite".to_owned(),
            "pg" => "postgres".to_owned(),
            n => n.to_owned(),
        };
        let mut found = BTreeSet::new();
        for part in code.split("crate::").skip(1) {
            let words: Vec<&str> = if let Some(group) = part.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                group
                    .split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .collect()
            } else {
                part.split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .take(1)
                    .collect()
            };
            for w in words {
                let w = alias(w);
                if names.contains(&w) {
                    found.insert(w);
                }
            }
        }
        found
    }

    /// Issue 37: the store's modules import each other without a cycle, so each area can be
    /// read (and changed) with what it depends on and nothing that depends on it.
    #[test]
    fn the_store_modules_import_each_other_without_a_cycle() {
        let modules = modules();
        let names: BTreeSet<String> = modules.keys().cloned().collect();
        let graph: BTreeMap<&str, BTreeSet<String>> = modules
            .iter()
            .map(|(m, code)| {
                let mut deps = imports(code, &names);
                deps.remove(m);
                (m.as_str(), deps)
            })
            .collect();
        assert!(graph.len() > 20, "found only {:?}", graph.keys());
        // Kahn: peel off modules nothing left imports; whatever remains lies on a cycle.
        let mut left: BTreeMap<&str, BTreeSet<String>> = graph.clone();
        loop {
            let leaves: Vec<&str> = left
                .iter()
                .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d.as_str())))
                .map(|(m, _)| *m)
                .collect();
            if leaves.is_empty() {
                break;
            }
            for m in leaves {
                left.remove(m);
            }
        }
        assert!(left.is_empty(), "modules on an import cycle: {left:?}");
    }

    /// Issue 37: shared code never asks which database it runs on; what differs lives in
    /// `sqlite/` and `postgres/` (see [`super::Dialect`]).
    #[test]
    fn no_shared_module_names_a_dialect() {
        let chooser = ["connect", "dialect", "plans", "testing"];
        for (name, code) in modules() {
            if name == "sqlite" || name == "postgres" || chooser.contains(&name.as_str()) {
                continue;
            }
            // Names of a database, and of its driver's own types (its error codes are judged
            // by each implementation: `Dialect::database_fault`).
            for dialect in [
                "Backend::Sqlite",
                "Backend::Postgres",
                "DbBackend::",
                "DatabaseBackend::",
                "rusqlite",
                "sqlx::sqlite",
                "sqlx::postgres",
                "SQLSTATE",
            ] {
                assert!(!code.contains(dialect), "{name} names {dialect}");
            }
        }
    }
}
