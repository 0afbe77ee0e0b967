//! Deliveries handed off at ingest on PostgreSQL, journaled instead of written (decisions 113).
//!
//! The message write inserts, for its batch's handed-off deliveries, one `handoffs` row (the
//! journal: owner, lease expiry, and the deliveries' ids, messages, endpoints and give-up
//! times as arrays) instead of a `deliveries` row each. This process remembers which of its
//! deliveries are only journaled ([`Journal`]). A success then writes its attempt alone; every
//! other path that touches a delivery by id (a failure's result, a release, a deferral, a
//! pause, a lease renewal once the attempt has run for a second) first writes its row out from
//! the journal ([`Store::write_out_handed`]), after which it is an ordinary delivery. A
//! journal is deleted once none of its deliveries is left in it. Should the process die, its
//! journals' leases run out and the reaper turns them into pending deliveries, less those that
//! succeeded ([`Store::reap_journals`]).
//!
//! A write-out checks that the journal is still this process's: one reaped after this process
//! stalled past its lease has been written out as pending already, and the delivery goes out
//! again (at least once), as with a claim whose lease ran out. A success is recorded whatever
//! became of its journal (the reaper does not bring back a delivery with a success attempt).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::DeliveryId;
use sea_orm::prelude::Uuid;

use crate::pg::ColumnArray;
use crate::{Result, Store};

/// This process's journaled deliveries: each one's journal, and each journal's owner and
/// number of deliveries still only journaled. Empty on SQLite, which writes every row.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    of: HashMap<DeliveryId, Uuid>,
    open: HashMap<Uuid, Open>,
}

#[derive(Debug)]
struct Open {
    owner: String,
    left: usize,
    since: Instant,
}

/// Deliveries taken out of the journal, to be written (or finished) by one statement.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// Each delivery with its journal.
    pub(crate) deliveries: Vec<(DeliveryId, Uuid)>,
    /// Journals left with no delivery: deleted by the same statement.
    pub(crate) emptied: Vec<Uuid>,
    /// What the journals looked like before, to put back should the statement fail.
    undo: Vec<(Uuid, String, Instant)>,
}

impl Taken {
    /// Nothing taken (a journal is only emptied by taking a delivery out of it).
    pub(crate) fn is_empty(&self) -> bool {
        self.deliveries.is_empty()
    }

    /// The ids taken.
    pub(crate) fn ids(&self) -> std::collections::HashSet<DeliveryId> {
        self.deliveries.iter().map(|(d, _)| *d).collect()
    }

    /// The deliveries' ids and their journals' as two arrays, then the emptied journals'.
    fn arrays(&self) -> [ColumnArray; 3] {
        let n = self.deliveries.len();
        [
            ColumnArray::Uuid(Vec::with_capacity(n))
                .filled(self.deliveries.iter().map(|(d, _)| *d)),
            ColumnArray::Uuid(self.deliveries.iter().map(|(_, j)| Some(*j)).collect()),
            self.emptied_array(),
        ]
    }

    /// The emptied journals' ids.
    pub(crate) fn emptied_array(&self) -> ColumnArray {
        ColumnArray::Uuid(self.emptied.iter().map(|j| Some(*j)).collect())
    }
}

impl Journal {
    /// Remembers a committed journal `id` of `owner`'s `deliveries`.
    pub(crate) fn record(&self, id: Uuid, owner: &str, deliveries: &[DeliveryId]) {
        if deliveries.is_empty() {
            return;
        }
        let mut inner = self.lock();
        for d in deliveries {
            inner.of.insert(*d, id);
        }
        inner.open.insert(
            id,
            Open {
                owner: owner.to_owned(),
                left: deliveries.len(),
                since: Instant::now(),
            },
        );
    }

    /// Takes out of the journal those of `ids` that `owner` journaled, at least `older` ago.
    pub(crate) fn take(
        &self,
        owner: &str,
        ids: impl IntoIterator<Item = DeliveryId>,
        older: Duration,
    ) -> Taken {
        let mut taken = Taken::default();
        let mut inner = self.lock();
        let Inner { of, open } = &mut *inner;
        if of.is_empty() {
            return taken;
        }
        let now = Instant::now();
        for id in ids {
            let Some(&journal) = of.get(&id) else {
                continue;
            };
            let Some(o) = open.get_mut(&journal) else {
                continue;
            };
            if o.owner != owner || now.duration_since(o.since) < older {
                continue;
            }
            of.remove(&id);
            o.left -= 1;
            if o.left == 0 {
                if let Some(o) = open.remove(&journal) {
                    taken.undo.push((journal, o.owner, o.since));
                }
                taken.emptied.push(journal);
            }
            taken.deliveries.push((id, journal));
        }
        taken
    }

    /// Puts back what `taken` took (its statement failed): the journal rows are unchanged.
    pub(crate) fn put_back(&self, taken: Taken) {
        let mut inner = self.lock();
        for (journal, owner, since) in taken.undo {
            inner.open.insert(
                journal,
                Open {
                    owner,
                    left: 0,
                    since,
                },
            );
        }
        for (id, journal) in taken.deliveries {
            if let Some(open) = inner.open.get_mut(&journal) {
                open.left += 1;
                inner.of.insert(id, journal);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How long an attempt of a journaled delivery runs before its delivery is written out at the
/// next lease renewal, so that the API and the dashboard show it in flight (before, a reader
/// sees the message and no delivery of it to that endpoint yet).
pub(crate) const SHOWN_AFTER: Duration = Duration::from_secs(1);

/// The columns a journaled delivery is written out with, in `deliveries`' order.
const COLUMNS: &str = "id, tenant_id, endpoint_id, msg_id, state, attempt_count, attempts_at_arm, \
     next_trigger, next_attempt_at, lease_owner, lease_expires_at, give_up_at, created_at, \
     updated_at";

/// A journal `h`'s deliveries, one row `j` each.
const UNNEST: &str = "CROSS JOIN LATERAL \
     unnest(h.delivery_ids, h.msg_ids, h.endpoint_ids, h.give_up_at) \
     AS j(id, msg_id, endpoint_id, give_up_at)";

/// The statement that writes out the deliveries of the journals `h` (a CTE) named by `x`
/// (`x.id` each delivery), as the message write would have, in `state`, leased by the
/// journal's owner while `sending`. A delivery whose endpoint or message is gone (deleted
/// meanwhile) is not written; one already written is left as it is.
fn write_out(journals: &str, chosen: &str, state: DeliveryState, extra: &str) -> String {
    let lease = match state {
        DeliveryState::Sending => "x.owner, x.expires_at",
        _ => "NULL, NULL",
    };
    format!(
        "{journals}, x AS (SELECT j.*, h.owner, h.expires_at, h.created_at FROM h {UNNEST}{chosen}) \
         INSERT INTO deliveries ({COLUMNS}) \
         SELECT x.id, e.tenant_id, x.endpoint_id, x.msg_id, '{state}', 0, 0, '{trigger}', \
           x.created_at, {lease}, x.give_up_at, x.created_at, x.created_at \
         FROM x JOIN endpoints e ON e.id = x.endpoint_id \
         WHERE EXISTS (SELECT 1 FROM messages m WHERE m.app_id = e.app_id AND m.id = x.msg_id){extra} \
         ON CONFLICT (id) DO NOTHING",
        state = state.as_str(),
        trigger = AttemptTrigger::Scheduled.as_str(),
    )
}

impl Store {
    /// Writes out the rows of those of `ids` that `owner` only journaled at least `older` ago,
    /// leased to it as at their handoff, and deletes the journals this empties. A no-op on
    /// SQLite and for deliveries already written.
    pub(crate) async fn write_out_handed(
        &self,
        owner: &str,
        ids: impl IntoIterator<Item = DeliveryId>,
        older: Duration,
    ) -> Result<()> {
        let taken = self.journal.take(owner, ids, older);
        if taken.is_empty() {
            return Ok(());
        }
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql = SQL.get_or_init(|| {
            let insert = write_out(
                "WITH h AS (SELECT * FROM handoffs WHERE owner = $1 AND id = ANY(CAST($3 AS uuid[])))",
                " JOIN unnest(CAST($2 AS uuid[])) AS w(id) ON w.id = j.id",
                DeliveryState::Sending,
                "",
            );
            format!(
                "WITH i AS ({insert} RETURNING 1), \
                 e AS (DELETE FROM handoffs WHERE owner = $1 AND id = ANY(CAST($4 AS uuid[]))) \
                 SELECT COUNT(*) AS n FROM i"
            )
        });
        let [ids, journals, emptied] = taken.arrays();
        let result = crate::pg::query_with_arrays_planned_now(
            &self.db,
            sql,
            vec![owner.into()],
            vec![ids, journals, emptied],
        )
        .await;
        if let Err(e) = result {
            self.journal.put_back(taken);
            return Err(e.into());
        }
        Ok(())
    }

    /// Turns the journals whose lease ran out before `now` (their process died, or stalled
    /// past its lease) into pending deliveries, less those that succeeded meanwhile, and
    /// deletes them. Returns how many deliveries it wrote. A no-op on SQLite.
    pub(crate) async fn reap_journals(&self, now: i64) -> Result<u64> {
        if self.backend != crate::Backend::Postgres {
            return Ok(0);
        }
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql = SQL.get_or_init(|| {
            use sea_orm::sea_query::{Expr, PostgresQueryBuilder};
            let succeeded = crate::outcomes::success(
                Expr::cust("x.msg_id"),
                Some(Expr::cust("x.endpoint_id")),
                false,
            )
            .to_string(PostgresQueryBuilder);
            let insert = write_out(
                "WITH h AS (DELETE FROM handoffs WHERE expires_at < $1 RETURNING *)",
                "",
                DeliveryState::Pending,
                &format!(" AND NOT EXISTS ({succeeded})"),
            );
            format!("{insert} RETURNING 1")
        });
        // Planned at each run: a plan kept from when the table was empty would read all of it.
        let rows =
            crate::pg::query_with_arrays_planned_now(&self.db, sql, vec![now.into()], Vec::new())
                .await?;
        Ok(rows.len() as u64)
    }
}
