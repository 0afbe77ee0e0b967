//! Retention: expiring payloads and removing old messages with their deliveries and attempts,
//! per application, as `domain::retention` decides (the application's choice, its tenant's,
//! else the server's).
//!
//! Each application is walked oldest first through `idx_messages_app` (app, id):
//! ids start with their creation time, so "created before the horizon" is an id range and no
//! time column or extra index is needed. Work goes in batches of [`BATCH`] messages, each its
//! own short write transaction, with a pause between batches so ingest and delivery keep the
//! writer; one pass does at most [`MAX_BATCHES`] in at most [`PASS_TIME`] and leaves the rest
//! to the next.
//!
//! What retention never touches: a message with a delivery still to be made (pending,
//! sending, or paused behind a disabled endpoint) or a failed delivery that holds its
//! ordering key (resending it is how the key flows again, so its payload must stay).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use domain::Timestamp;
use domain::delivery::DeliveryState;
use domain::ids::{ApplicationId, MessageId, TenantId};
use domain::retention::{Retention, RetentionDays};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use crate::Result;
use crate::entities::{application, attempt, delivery, message, tenant};

/// Messages per batch: each batch is one write transaction, and on SQLite ingest and
/// delivery wait for it, so it is kept short (measured: 500 per batch doubled ingest p99 in a
/// soak at 500 msg/s; see BENCHMARKS.md).
pub const BATCH: u64 = 100;
/// Most batches per pass (over every application); the rest waits for the next pass.
const MAX_BATCHES: u64 = 2000;
/// Applications read per page while walking them.
const APPS_PAGE: u64 = 500;
/// Given to the hot path between two batches: as long as the batch took (pruning takes at most
/// half the time while a pass runs), at least [`MIN_PAUSE`], at most [`MAX_PAUSE`]. Measured on
/// PostgreSQL at 500 msg/s under a 60 s retention (docs/benchmarks-history.md, session 18): a fixed 20 ms
/// pause put ingest p99 ~20 % above the same load without pruning in 3-minute runs; with this
/// pacing a 15-minute run stayed flat at ~91 MB with ingest p99 15.8 ms against 29.5 ms
/// without pruning. Three times the batch's time (session 16) pruned ~310 messages a second
/// against 500 arriving and the tables grew; the cap keeps a slow database's pass from
/// crawling.
const MIN_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_millis(250);

fn pause_after(batch: Duration) -> Duration {
    batch.clamp(MIN_PAUSE, MAX_PAUSE)
}

/// What a pass removed (or, dry, would remove).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Messages removed with their deliveries and attempts (metadata horizon passed).
    pub messages: u64,
    pub deliveries: u64,
    pub attempts: u64,
    /// Messages whose payload (and attempts' response bodies) expired.
    pub payloads: u64,
    /// Messages past a horizon kept because a delivery is still live (see the module).
    pub kept_live: u64,
    /// The pass stopped at its batch limit; more is due.
    pub more: bool,
}

/// Empties the payloads of `ids` and their attempts' response bodies and headers: what an expunge does
/// and what an expired payload becomes (one rule for both; see `message::Model::is_expunged`).
pub(crate) async fn empty_contents(
    db: &impl ConnectionTrait,
    sql: &crate::dialect::Dialect,
    app: ApplicationId,
    ids: &[MessageId],
) -> Result<()> {
    message::Entity::update_many()
        .col_expr(message::Column::Payload, Expr::value(Vec::<u8>::new()))
        .filter(sql.messages_of(app, ids))
        .exec(db)
        .await?;
    attempt::Entity::update_many()
        .col_expr(
            attempt::Column::ResponseExcerpt,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            attempt::Column::ResponseHeaders,
            Expr::value(Option::<String>::None),
        )
        .filter(attempt::Column::MsgId.is_in(ids.iter().copied()))
        .exec(db)
        .await?;
    Ok(())
}

/// Deliveries that keep their message (and its payload) whatever its age.
fn live_deliveries() -> Condition {
    Condition::any()
        .add(delivery::Column::State.is_in([
            DeliveryState::Pending.as_str(),
            DeliveryState::Sending.as_str(),
            DeliveryState::Paused.as_str(),
        ]))
        .add(
            Condition::all()
                .add(delivery::Column::State.eq(DeliveryState::Failed.as_str()))
                .add(delivery::Column::OrderingKey.is_not_null()),
        )
}

/// One application's walk: which rows, and what is done to them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Remove messages with ids below the horizon, with their deliveries and attempts.
    Remove,
    /// Empty the contents of messages with ids in `[from, horizon)`.
    Expire { from: MessageId },
}

/// The longest a pass runs before it leaves the rest to the next: a process stopping (SIGTERM)
/// waits for the pass in progress, and a pass of [`MAX_BATCHES`] over a large backlog took
/// 4.5 minutes on a loaded PostgreSQL (session 18).
const PASS_TIME: Duration = Duration::from_secs(10);

/// Batches and time left in a pass. Only batches that found messages count, so applications
/// with nothing due cost one probe each and never end a pass early.
struct Budget {
    batches: u64,
    until: std::time::Instant,
}

impl Budget {
    fn new(now: std::time::Instant) -> Budget {
        Budget {
            batches: MAX_BATCHES,
            until: now + PASS_TIME,
        }
    }

    fn spent(&self) -> bool {
        self.batches == 0 || std::time::Instant::now() >= self.until
    }

    fn take(&mut self) {
        self.batches = self.batches.saturating_sub(1);
    }
}

impl crate::System<'_> {
    /// One retention pass over every application at `now`, under `server` (the operator's
    /// defaults) with each tenant's and application's own choices. `dry_run` counts what
    /// would go and changes nothing.
    pub async fn prune_retention(
        &self,
        server: Retention,
        now: Timestamp,
        dry_run: bool,
    ) -> Result<Pruned> {
        let tenants: HashMap<TenantId, RetentionDays> = tenant::Entity::find()
            .filter(
                Condition::any()
                    .add(tenant::Column::PayloadRetentionDays.is_not_null())
                    .add(tenant::Column::MetadataRetentionDays.is_not_null()),
            )
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.retention()))
            .collect();
        let mut out = Pruned::default();
        let mut budget = Budget::new(std::time::Instant::now());
        let mut after: Option<ApplicationId> = None;
        loop {
            let mut page = application::Entity::find().order_by_asc(application::Column::Id);
            if let Some(a) = after {
                page = page.filter(application::Column::Id.gt(a));
            }
            let apps = page.limit(APPS_PAGE).all(&self.db).await?;
            for app in &apps {
                let tenant_days = tenants.get(&app.tenant_id).copied().unwrap_or_default();
                let r = server.choose(&[tenant_days, app.retention()]);
                let horizon = |kept: Duration| {
                    MessageId::lower_bound(Timestamp::from_millis(
                        now.as_millis()
                            .saturating_sub(i64::try_from(kept.as_millis()).unwrap_or(i64::MAX)),
                    ))
                };
                let removed_below = horizon(r.metadata);
                self.walk(
                    app,
                    Step::Remove,
                    removed_below,
                    dry_run,
                    &mut budget,
                    &mut out,
                )
                .await?;
                let mark = app
                    .payload_expunged_before
                    .as_deref()
                    .and_then(|m| MessageId::parse(m).ok());
                let from = mark.map_or(removed_below, |m| m.max(removed_below));
                let expire_below = horizon(r.payload);
                if from < expire_below {
                    let done = self
                        .walk(
                            app,
                            Step::Expire { from },
                            expire_below,
                            dry_run,
                            &mut budget,
                            &mut out,
                        )
                        .await?;
                    if !dry_run && let Some(reached) = done {
                        application::Entity::update_many()
                            .col_expr(
                                application::Column::PayloadExpungedBefore,
                                Expr::value(reached.to_string()),
                            )
                            .filter(application::Column::Id.eq(app.id))
                            .exec(&self.db)
                            .await?;
                    }
                }
                if budget.spent() {
                    out.more = true;
                    return Ok(out);
                }
            }
            match apps.last() {
                Some(last) if apps.len() as u64 == APPS_PAGE => after = Some(last.id),
                _ => return Ok(out),
            }
        }
    }

    /// Walks one application's messages below `below` (from `from` for [`Step::Expire`]),
    /// oldest first, a batch at a time. Returns how far it got: `below` when it finished,
    /// the last id it handled when the budget ran out, `None` if it handled none.
    async fn walk(
        &self,
        app: &application::Model,
        step: Step,
        below: MessageId,
        dry_run: bool,
        budget: &mut Budget,
        out: &mut Pruned,
    ) -> Result<Option<MessageId>> {
        let mut last: Option<MessageId> = None;
        loop {
            if budget.spent() {
                return Ok(last);
            }
            let after = match (last, step) {
                (Some(l), _) => Bound::After(l),
                (None, Step::Expire { from }) => Bound::From(from),
                (None, Step::Remove) => Bound::Start,
            };
            let batch_started = std::time::Instant::now();
            let ids: Vec<MessageId> = walk_batch(app.tenant_id, app.id, below, after)
                .into_tuple()
                .all(&self.db)
                .await?;
            let Some(&end) = ids.last() else {
                return Ok(Some(below));
            };
            budget.take();
            let live: HashSet<MessageId> = delivery::Entity::find()
                .select_only()
                .column(delivery::Column::MsgId)
                .filter(delivery::Column::MsgId.is_in(ids.iter().copied()))
                .filter(live_deliveries())
                .into_tuple()
                .all(&self.db)
                .await?
                .into_iter()
                .collect();
            let doomed: Vec<MessageId> = ids
                .iter()
                .copied()
                .filter(|id| !live.contains(id))
                .collect();
            out.kept_live += (ids.len() - doomed.len()) as u64;
            if !doomed.is_empty() {
                match step {
                    Step::Remove => self.remove(app.id, &doomed, dry_run, out).await?,
                    Step::Expire { .. } => {
                        out.payloads += doomed.len() as u64;
                        if !dry_run {
                            let txn = self.write_txn().await?;
                            empty_contents(&*txn, self.sql, app.id, &doomed).await?;
                            txn.commit().await?;
                        }
                    }
                }
            }
            if (ids.len() as u64) < BATCH {
                return Ok(Some(below));
            }
            last = Some(end);
            tokio::time::sleep(pause_after(batch_started.elapsed())).await;
        }
    }

    /// Removes messages with their deliveries and attempts (or counts them, dry).
    async fn remove(
        &self,
        app: ApplicationId,
        ids: &[MessageId],
        dry_run: bool,
        out: &mut Pruned,
    ) -> Result<()> {
        let of_attempts = || attempt::Column::MsgId.is_in(ids.iter().copied());
        let of_deliveries = || delivery::Column::MsgId.is_in(ids.iter().copied());
        out.messages += ids.len() as u64;
        if dry_run {
            out.attempts += attempt::Entity::find()
                .filter(of_attempts())
                .count(&self.db)
                .await?;
            out.deliveries += delivery::Entity::find()
                .filter(of_deliveries())
                .count(&self.db)
                .await?;
            return Ok(());
        }
        let txn = self.write_txn().await?;
        out.attempts += attempt::Entity::delete_many()
            .filter(of_attempts())
            .exec(&*txn)
            .await?
            .rows_affected;
        out.deliveries += delivery::Entity::delete_many()
            .filter(of_deliveries())
            .exec(&*txn)
            .await?
            .rows_affected;
        message::Entity::delete_many()
            .filter(self.sql.messages_of(app, ids))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }
}

/// Where a walk's next batch starts.
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    Start,
    From(MessageId),
    After(MessageId),
}

/// The ids of one batch of an application's messages below `below`, oldest first, through
/// `idx_messages_app`.
pub(crate) fn walk_batch(
    tenant: TenantId,
    app_id: ApplicationId,
    below: MessageId,
    after: Bound,
) -> sea_orm::Select<message::Entity> {
    let q = message::Entity::find()
        .select_only()
        .column(message::Column::Id)
        .filter(message::Column::TenantId.eq(tenant))
        .filter(message::Column::AppId.eq(app_id))
        .filter(message::Column::Id.lt(below));
    let q = match after {
        Bound::After(l) => q.filter(message::Column::Id.gt(l)),
        Bound::From(f) => q.filter(message::Column::Id.gte(f)),
        Bound::Start => q,
    };
    q.order_by_asc(message::Column::Id).limit(BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_between_batches_is_the_batch_time_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(pause_after(ms(1)), MIN_PAUSE);
        assert_eq!(pause_after(ms(60)), ms(60), "half the time to pruning");
        assert_eq!(pause_after(ms(5_000)), MAX_PAUSE);
    }

    #[test]
    fn a_pass_ends_at_its_batch_limit_or_its_time_whichever_comes_first() {
        let now = std::time::Instant::now();
        let mut fresh = Budget::new(now);
        assert!(!fresh.spent());
        fresh.take();
        assert!(!fresh.spent(), "one batch of {MAX_BATCHES}");
        let late = Budget::new(now - PASS_TIME);
        assert!(late.spent(), "a pass that has run {PASS_TIME:?} stops");
        let mut used = Budget::new(now);
        for _ in 0..MAX_BATCHES {
            used.take();
        }
        assert!(used.spent());
    }
}

/// What [`crate::System::reclaim_space`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// SQLite reuses the pages a delete frees (its free list) with no help; PostgreSQL with
    /// autovacuum on reclaims dead rows itself.
    Automatic,
    /// PostgreSQL with autovacuum off: hookd vacuumed its busy tables itself.
    Vacuumed,
}

/// The tables whose rows are updated or deleted all day (deliveries twice per attempt).
const BUSY_TABLES: &str = "messages, deliveries, attempts, endpoints, idempotency_keys, \
    sessions, operational_events, email_outbox, jobs, attempt_stats, ordering_sequences, handoffs";

impl crate::System<'_> {
    /// Makes the space of deleted and updated rows reusable, where the database would not.
    ///
    /// PostgreSQL keeps a deleted or updated row's old version until a VACUUM; with the
    /// server's `autovacuum` off (measured: a 500 msg/s soak under a 60 s retention grew
    /// 33 MB every 30 s, without end) nothing ever does, and pruning frees nothing. Then
    /// hookd runs a plain VACUUM (no lock that blocks reads or writes) of its busy tables.
    pub async fn reclaim_space(&self) -> Result<Reclaim> {
        if !self.sql.may_need_vacuum {
            return Ok(Reclaim::Automatic);
        }
        let backend = self.db.get_database_backend();
        let row = self
            .db
            .query_one(sea_orm::Statement::from_string(
                backend,
                "SELECT current_setting('autovacuum') AS on",
            ))
            .await?;
        let on = row
            .map(|r| r.try_get::<String>("", "on"))
            .transpose()?
            .is_none_or(|v| v == "on");
        if on {
            return Ok(Reclaim::Automatic);
        }
        self.db
            .execute_unprepared(&format!("VACUUM {BUSY_TABLES}"))
            .await?;
        Ok(Reclaim::Vacuumed)
    }
}
