//! Inbound sources (issue 21): where webhooks from outside arrive, how they are verified
//! (sealed, as endpoint secrets are), and which application's endpoints receive them.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{SourceId, TenantId};
use domain::inbound::{Ordering, Scheme};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, Statement,
};

use crate::entities::{
    Owned, application, inbound_held, inbound_key, inbound_refusal, inbound_signed, inbound_source,
};
use crate::error::check_owner;
use crate::error::conflict_as;
use crate::sealed::{open_json, seal_json};
use crate::{Result, Store, StoreError, System};

/// A source with its verification opened.
#[derive(Debug, Clone)]
pub struct Source {
    pub row: inbound_source::Model,
    pub settings: SourceSettings,
    /// Opened from `row.url_token`: the token its URL carries, if it has one.
    pub url_token: Option<String>,
}

/// What a source does with what arrives: how it verifies, orders and names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSettings {
    /// The event type of what it receives, unless the scheme names one.
    pub event_type: String,
    pub scheme: Scheme,
    pub ordering: Ordering,
    /// How far a signed timestamp may be from now; none: `DEFAULT_TOLERANCE`.
    pub tolerance_secs: Option<u64>,
}

impl SourceSettings {
    /// The tolerance its signed timestamps are checked against.
    pub fn tolerance(&self) -> Duration {
        self.tolerance_secs
            .map(Duration::from_secs)
            .unwrap_or(domain::inbound::DEFAULT_TOLERANCE)
    }

    /// The tolerance, for a scheme that signs a timestamp (what is shown of it).
    pub fn signed_tolerance(&self) -> Option<Duration> {
        self.scheme.signs_timestamp().then(|| self.tolerance())
    }
}

/// The `ordering` column: none for the defaults.
fn stored_ordering(ordering: &Ordering) -> Option<String> {
    (ordering != &Ordering::default()).then(|| serde_json::to_string(ordering).expect("plain data"))
}

/// The `tolerance_secs` column.
fn stored_tolerance(settings: &SourceSettings) -> Option<i64> {
    settings.tolerance_secs.and_then(|t| i64::try_from(t).ok())
}

use crate::sealed::{source_context as context, source_url_token_context as url_token_context};

impl Store {
    fn open_source(&self, row: inbound_source::Model) -> Result<Source> {
        let what = format!("inbound source {}: column verification", row.id);
        let scheme = open_json(&self.seal, &context(&row.id), &row.verification, &what)?;
        let ordering = match &row.ordering {
            Some(json) => serde_json::from_str(json).map_err(|e| {
                StoreError::Corrupt(format!("inbound source {}: column ordering: {e}", row.id))
            })?,
            None => Ordering::default(),
        };
        let settings = SourceSettings {
            event_type: row.event_type.clone(),
            scheme,
            ordering,
            tolerance_secs: row.tolerance_secs.and_then(|t| u64::try_from(t).ok()),
        };
        let url_token = row
            .url_token
            .as_deref()
            .map(|t| self.seal.open(t, &url_token_context(&row.id)))
            .transpose()?;
        Ok(Source {
            row,
            settings,
            url_token,
        })
    }

    /// Creates a source forwarding to `app`; its name is unique within the tenant.
    pub async fn create_source(
        &self,
        tenant: TenantId,
        app: &application::Model,
        name: &str,
        settings: &SourceSettings,
    ) -> Result<Source> {
        self.create_source_with(tenant, app, name, settings, None, None)
            .await
    }

    /// [`Store::create_source`] with what Svix's Ingest API says of it (JSON) and the token
    /// its URL carries.
    pub async fn create_source_with(
        &self,
        tenant: TenantId,
        app: &application::Model,
        name: &str,
        settings: &SourceSettings,
        ingest: Option<String>,
        url_token: Option<&str>,
    ) -> Result<Source> {
        check_owner(tenant, &app.tenant_id, "application")?;
        let id = SourceId::new();
        let row = inbound_source::ActiveModel {
            id: Set(id),
            tenant_id: Set(tenant),
            app_id: Set(app.id),
            name: Set(name.to_owned()),
            event_type: Set(settings.event_type.clone()),
            verification: Set(seal_json(&self.seal, &context(&id), &settings.scheme)),
            created_at: Set(Timestamp::now().as_millis()),
            ordering: Set(stored_ordering(&settings.ordering)),
            tolerance_secs: Set(stored_tolerance(settings)),
            duplicates: Set(0),
            refused: Set(0),
            last_refused_at: Set(None),
            declared: Set(false),
            unrecorded: Set(0),
            ingest: Set(ingest),
            url_token: Set(url_token.map(|t| self.seal.seal(t, &url_token_context(&id)))),
        };
        let txn = self.write_txn().await?;
        let row = row.insert(&*txn).await.map_err(conflict_as("name"))?;
        txn.commit().await?;
        self.open_source(row)
    }

    /// The tenant's source of this name, if there is one.
    pub async fn source_named(&self, tenant: TenantId, name: &str) -> Result<Option<Source>> {
        inbound_source::Entity::find_in(tenant)
            .filter(inbound_source::Column::Name.eq(name))
            .one(&self.db)
            .await?
            .map(|r| self.open_source(r))
            .transpose()
    }

    /// Changes what `source` forwards to and how it verifies and orders; its id (so its URL),
    /// name and counts stay. The verification is sealed afresh.
    pub async fn update_source(
        &self,
        source: &Source,
        app: &application::Model,
        settings: &SourceSettings,
    ) -> Result<Source> {
        let ingest = source.row.ingest.clone();
        self.update_source_with(source, app, settings, ingest).await
    }

    /// [`Store::update_source`], with what Svix's Ingest API says of it now.
    pub async fn update_source_with(
        &self,
        source: &Source,
        app: &application::Model,
        settings: &SourceSettings,
        ingest: Option<String>,
    ) -> Result<Source> {
        let row = &source.row;
        check_owner(row.tenant_id, &app.tenant_id, "application")?;
        let mut changed: inbound_source::ActiveModel = row.clone().into();
        changed.ingest = Set(ingest);
        changed.app_id = Set(app.id);
        changed.event_type = Set(settings.event_type.clone());
        changed.verification = Set(seal_json(&self.seal, &context(&row.id), &settings.scheme));
        changed.ordering = Set(stored_ordering(&settings.ordering));
        changed.tolerance_secs = Set(stored_tolerance(settings));
        let txn = self.write_txn().await?;
        let row = changed.update(&*txn).await?;
        txn.commit().await?;
        self.sources.clear();
        self.open_source(row)
    }

    /// Replaces the token `source`'s URL carries: the old URL stops working at once here, and
    /// within a second (the source cache) on other nodes.
    pub async fn set_source_url_token(&self, source: &Source, token: &str) -> Result<Source> {
        let id = source.row.id;
        let mut changed: inbound_source::ActiveModel = source.row.clone().into();
        changed.url_token = Set(Some(self.seal.seal(token, &url_token_context(&id))));
        let txn = self.write_txn().await?;
        let row = changed.update(&*txn).await?;
        txn.commit().await?;
        self.sources.clear();
        self.open_source(row)
    }

    /// The tenant's sources, oldest first.
    pub async fn list_sources(&self, tenant: TenantId) -> Result<Vec<Source>> {
        inbound_source::Entity::find_in(tenant)
            .order_by_asc(inbound_source::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|r| self.open_source(r))
            .collect()
    }

    pub async fn get_source(&self, tenant: TenantId, id: &str) -> Result<Source> {
        let id: SourceId = id.parse().map_err(|_| StoreError::not_found("source"))?;
        let row = inbound_source::Entity::find_in(tenant)
            .filter(inbound_source::Column::Id.eq(id))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("source"))?;
        self.open_source(row)
    }

    /// Marks a source as declared by a configuration file (see `inbound_source::declared`).
    pub async fn mark_source_declared(&self, source: &Source) -> Result<()> {
        if source.row.declared {
            return Ok(());
        }
        let txn = self.write_txn().await?;
        inbound_source::Entity::update_many()
            .col_expr(inbound_source::Column::Declared, Expr::value(true))
            .filter(inbound_source::Column::Id.eq(source.row.id))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        self.sources.clear();
        Ok(())
    }

    pub async fn delete_source(&self, tenant: TenantId, id: &str) -> Result<()> {
        let source = self.get_source(tenant, id).await?;
        let txn = self.write_txn().await?;
        delete_sources(&*txn, vec![source.row.id]).await?;
        txn.commit().await?;
        self.sources.clear();
        Ok(())
    }
}

impl System<'_> {
    /// The source an inbound request names, whoever's it is (the request carries no
    /// credential but its signature, checked next). A copy at most a second old (`cache`):
    /// a flood of requests to a source costs no query each; unknown ids are never kept.
    pub async fn source(&self, id: &str) -> Result<Source> {
        let id: SourceId = id.parse().map_err(|_| StoreError::not_found("source"))?;
        let load = async {
            let row = inbound_source::Entity::find_by_id(id).one(&self.db).await?;
            row.map(|r| self.open_source(r)).transpose()
        };
        self.sources
            .get_or_load(id, load)
            .await?
            .ok_or(StoreError::not_found("source"))
    }
}

/// Deletes sources with their held events, ordering keys, signed digests and refused requests.
async fn delete_sources(db: &impl ConnectionTrait, ids: Vec<SourceId>) -> Result<()> {
    inbound_refusal::Entity::delete_many()
        .filter(inbound_refusal::Column::SourceId.is_in(ids.clone()))
        .exec(db)
        .await?;
    inbound_signed::Entity::delete_many()
        .filter(inbound_signed::Column::SourceId.is_in(ids.clone()))
        .exec(db)
        .await?;
    inbound_held::Entity::delete_many()
        .filter(inbound_held::Column::SourceId.is_in(ids.clone()))
        .exec(db)
        .await?;
    inbound_key::Entity::delete_many()
        .filter(inbound_key::Column::SourceId.is_in(ids.clone()))
        .exec(db)
        .await?;
    inbound_source::Entity::delete_many()
        .filter(inbound_source::Column::Id.is_in(ids))
        .exec(db)
        .await?;
    Ok(())
}

/// Deletes the sources that forward to application `app` (it is being deleted).
pub(crate) async fn delete_sources_of(
    db: &impl ConnectionTrait,
    app: domain::ids::ApplicationId,
) -> Result<()> {
    let ids: Vec<SourceId> = inbound_source::Entity::find()
        .select_only()
        .column(inbound_source::Column::Id)
        .filter(inbound_source::Column::AppId.eq(app))
        .into_tuple()
        .all(db)
        .await?;
    if ids.is_empty() {
        return Ok(());
    }
    delete_sources(db, ids).await
}

/// What became of an ordered event offered to its key ([`Store::offer_inbound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Its turn now, and the key is the caller's: forward it, then [`Store::advance_inbound`].
    Turn,
    /// Held: ahead of a gap, or its key is being forwarded by someone else (who will find it).
    Held,
    /// Its key is already past its sequence: forward it now (unless it is a repeat).
    Late,
    /// The same sequence of the same key is already held.
    Duplicate,
    /// Ahead of a gap while the caller may hold no more: nothing written.
    Full,
}

/// An event held for its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldEvent {
    pub seq: i64,
    pub event_id: Option<String>,
    pub event_type: String,
    pub payload: Vec<u8>,
}

/// The held events of one key whose turn has come, in the order they go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Turn {
    pub events: Vec<HeldEvent>,
    /// Sequences given up on: `(first, last)` of a gap held for its full time.
    pub gap: Option<(i64, i64)>,
}

fn until(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2))
}

/// Held events read per key at a time.
const TURN_LIMIT: u64 = 100;

fn key_filter(source: SourceId, key: &str) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(inbound_key::Column::SourceId.eq(source))
        .add(inbound_key::Column::OrderingKey.eq(key))
}

/// Moves a key past sequence `seq` (never back), and marks it used now.
async fn move_past(db: &impl ConnectionTrait, source: SourceId, key: &str, seq: i64) -> Result<()> {
    inbound_key::Entity::update_many()
        .col_expr(inbound_key::Column::NextSeq, Expr::value(seq + 1))
        .filter(key_filter(source, key))
        .filter(inbound_key::Column::NextSeq.lte(seq))
        .exec(db)
        .await?;
    inbound_key::Entity::update_many()
        .col_expr(
            inbound_key::Column::TouchedAt,
            Expr::value(Timestamp::now().as_millis()),
        )
        .filter(key_filter(source, key))
        .exec(db)
        .await?;
    Ok(())
}

fn held_filter(source: SourceId, key: &str) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(inbound_held::Column::SourceId.eq(source))
        .add(inbound_held::Column::OrderingKey.eq(key))
}

/// Where a key's turn starts, and which held events (sorted by sequence) go from there: those
/// behind it (late or repeated: they go at once), then an unbroken run from it. A first held
/// event ahead of a gap goes, gap given up, once it was held `hold` before `now`.
fn take_turn(next: i64, held: Vec<inbound_held::Model>, hold: Duration, now: Timestamp) -> Turn {
    let mut turn = Turn::default();
    let mut expect = next;
    let hold_ms = i64::try_from(hold.as_millis()).unwrap_or(i64::MAX);
    for row in held {
        if row.seq > expect {
            let waited = now.as_millis().saturating_sub(row.held_at) >= hold_ms;
            // Only the first event past the key's place can give a gap up: one later in the
            // run waits for the gap before it to be given up on its own time.
            if !waited || turn.events.iter().any(|e| e.seq >= next) {
                break;
            }
            turn.gap = Some((expect, row.seq - 1));
            expect = row.seq;
        }
        if row.seq == expect {
            expect += 1;
        }
        turn.events.push(HeldEvent {
            seq: row.seq,
            event_id: row.event_id,
            event_type: row.event_type,
            payload: row.payload,
        });
    }
    turn
}

impl Store {
    /// Offers an ordered event to its key, in one write: its turn (the key's next sequence,
    /// and nobody forwarding the key) takes the key for the caller; otherwise it is held until
    /// its turn, unless the key is already past it. The key's first event expects sequence 1.
    pub async fn offer_inbound(
        &self,
        source: &Source,
        key: &str,
        seq: i64,
        event: &crate::NewMessage,
        lease: Duration,
        hold_ahead: bool,
    ) -> Result<Offer> {
        self.health.take_messages()?;
        let now = Timestamp::now().as_millis();
        let id = source.row.id;
        let txn = self.write_txn().await?;
        // Locked (PostgreSQL) so that an offer and the key's advance never miss each other.
        let find = || {
            inbound_key::Entity::find()
                .filter(key_filter(id, key))
                .lock_exclusive()
        };
        let k = match find().one(&*txn).await? {
            Some(k) => k,
            None => {
                inbound_key::Entity::insert(inbound_key::ActiveModel {
                    source_id: Set(id),
                    ordering_key: Set(key.to_owned()),
                    tenant_id: Set(source.row.tenant_id),
                    next_seq: Set(1),
                    lease_until: Set(0),
                    touched_at: Set(now),
                })
                .on_conflict(
                    OnConflict::columns([
                        inbound_key::Column::SourceId,
                        inbound_key::Column::OrderingKey,
                    ])
                    .do_nothing()
                    .to_owned(),
                )
                .exec_without_returning(&*txn)
                .await?;
                find()
                    .one(&*txn)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("an inbound key vanished".into()))?
            }
        };
        if seq < k.next_seq {
            // Nothing written: dropping it rolls it back.
            drop(txn);
            return Ok(Offer::Late);
        }
        if seq == k.next_seq && k.lease_until < now {
            inbound_key::Entity::update_many()
                .col_expr(
                    inbound_key::Column::LeaseUntil,
                    Expr::value(until(now, lease)),
                )
                .filter(key_filter(id, key))
                .exec(&*txn)
                .await?;
            txn.commit().await?;
            return Ok(Offer::Turn);
        }
        if seq > k.next_seq && !hold_ahead {
            // A repeat of one held already is still a duplicate; anything else is refused,
            // and nothing written (dropping the transaction rolls back a key just made).
            let held = inbound_held::Entity::find()
                .filter(held_filter(id, key))
                .filter(inbound_held::Column::Seq.eq(seq))
                .one(&*txn)
                .await?
                .is_some();
            drop(txn);
            return Ok(if held { Offer::Duplicate } else { Offer::Full });
        }
        let inserted = inbound_held::Entity::insert(inbound_held::ActiveModel {
            source_id: Set(id),
            ordering_key: Set(key.to_owned()),
            seq: Set(seq),
            tenant_id: Set(source.row.tenant_id),
            held_at: Set(now),
            event_id: Set(event.event_id.clone()),
            event_type: Set(event.event_type.clone()),
            payload: Set(event.payload.clone()),
        })
        .on_conflict(
            OnConflict::columns([
                inbound_held::Column::SourceId,
                inbound_held::Column::OrderingKey,
                inbound_held::Column::Seq,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(&*txn)
        .await?;
        txn.commit().await?;
        Ok(if inserted == 0 {
            Offer::Duplicate
        } else {
            Offer::Held
        })
    }

    /// After the caller forwarded sequence `seq` of a key it holds ([`Offer::Turn`]): moves
    /// the key past it and lets the key go, in one write. `true` when events at or behind the
    /// key's new place were held meanwhile: the caller forwards them ([`Store::lease_inbound_key`]).
    pub async fn advance_inbound(&self, source: SourceId, key: &str, seq: i64) -> Result<bool> {
        self.release_key(source, key, Some(seq)).await
    }

    /// Takes key `key` of `source` to forward its events, unless another process holds it
    /// (for up to `ttl`: a process that dies holding it delays the key that long).
    pub async fn lease_inbound_key(
        &self,
        source: SourceId,
        key: &str,
        ttl: Duration,
    ) -> Result<bool> {
        let now = Timestamp::now().as_millis();
        let txn = self.write_txn().await?;
        let taken = inbound_key::Entity::update_many()
            .col_expr(
                inbound_key::Column::LeaseUntil,
                Expr::value(until(now, ttl)),
            )
            .filter(key_filter(source, key))
            .filter(inbound_key::Column::LeaseUntil.lt(now))
            .exec(&*txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        Ok(taken == 1)
    }

    /// The held events of a key whose turn has come (see [`Turn`]), at most a hundred.
    pub async fn inbound_turn(&self, source: SourceId, key: &str, hold: Duration) -> Result<Turn> {
        let Some(k) = inbound_key::Entity::find()
            .filter(key_filter(source, key))
            .one(&self.db)
            .await?
        else {
            return Ok(Turn::default());
        };
        let held = inbound_held::Entity::find()
            .filter(held_filter(source, key))
            .order_by_asc(inbound_held::Column::Seq)
            .limit(TURN_LIMIT)
            .all(&self.db)
            .await?;
        Ok(take_turn(k.next_seq, held, hold, Timestamp::now()))
    }

    /// Marks held events of one key forwarded (`seqs`, in order): they go, and the key moves
    /// past the last, in one write.
    pub async fn forwarded_inbound(&self, source: SourceId, key: &str, seqs: &[i64]) -> Result<()> {
        let Some(&last) = seqs.iter().max() else {
            return Ok(());
        };
        let txn = self.write_txn().await?;
        inbound_held::Entity::delete_many()
            .filter(held_filter(source, key))
            .filter(inbound_held::Column::Seq.is_in(seqs.iter().copied()))
            .exec(&*txn)
            .await?;
        move_past(&*txn, source, key, last).await?;
        txn.commit().await?;
        Ok(())
    }

    /// Lets a key go. `true` when an event at or behind its place was held meanwhile (by a
    /// request that found the key taken): the caller takes the key again for it.
    pub async fn unlease_inbound_key(&self, source: SourceId, key: &str) -> Result<bool> {
        self.release_key(source, key, None).await
    }

    /// Lets a key go, first moving it past `forwarded` if given, in one write; `true` when a
    /// held event is at or behind the key's place then.
    async fn release_key(
        &self,
        source: SourceId,
        key: &str,
        forwarded: Option<i64>,
    ) -> Result<bool> {
        let txn = self.write_txn().await?;
        if let Some(seq) = forwarded {
            move_past(&*txn, source, key, seq).await?;
        }
        inbound_key::Entity::update_many()
            .col_expr(inbound_key::Column::LeaseUntil, Expr::value(0i64))
            .filter(key_filter(source, key))
            .exec(&*txn)
            .await?;
        let next = inbound_key::Entity::find()
            .select_only()
            .column(inbound_key::Column::NextSeq)
            .filter(key_filter(source, key))
            .into_tuple::<i64>()
            .one(&*txn)
            .await?;
        let waiting = match next {
            Some(next) => inbound_held::Entity::find()
                .filter(held_filter(source, key))
                .filter(inbound_held::Column::Seq.lte(next))
                .one(&*txn)
                .await?
                .is_some(),
            None => false,
        };
        txn.commit().await?;
        Ok(waiting)
    }

    /// How many events each source of every tenant holds; sources holding none are left out.
    pub async fn held_by_source(&self) -> Result<Vec<(SourceId, u64)>> {
        Ok(self
            .held_per_source(inbound_held::Entity::find())
            .await?
            .into_iter()
            .map(|(s, n, _)| (s, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// Held events, by source: how many, and since when the oldest waits.
    pub async fn held_inbound_counts(&self, tenant: TenantId) -> Result<Vec<(SourceId, i64, i64)>> {
        self.held_per_source(inbound_held::Entity::find_in(tenant))
            .await
    }

    /// `(source, held, oldest held_at)` of the held events `rows` selects, grouped through
    /// the held table's key (whose first column is the source).
    async fn held_per_source(
        &self,
        rows: sea_orm::Select<inbound_held::Entity>,
    ) -> Result<Vec<(SourceId, i64, i64)>> {
        Ok(rows
            .select_only()
            .column(inbound_held::Column::SourceId)
            .column_as(inbound_held::Column::Seq.count(), "n")
            .column_as(inbound_held::Column::HeldAt.min(), "since")
            .group_by(inbound_held::Column::SourceId)
            .into_tuple()
            .all(&self.db)
            .await?)
    }
}

/// What a source made of the digest of a request's signed bytes ([`Store::claim_signed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Not seen within the window: now recorded until `expires_at` (milliseconds).
    Fresh { expires_at: i64 },
    /// Seen within the window with the same event id: the same request again (a sender's
    /// retry), left to the event-id dedup.
    Same,
    /// Seen within the window under another id, or with none: a replay.
    Replay,
}

impl Store {
    /// Records that `source` was sent the bytes whose digest is `digest`, under `event_id`,
    /// for `window`, in one write; or says it was within the window already. A row whose
    /// window ended is taken over.
    pub async fn claim_signed(
        &self,
        source: &Source,
        digest: &str,
        event_id: Option<&str>,
        window: Duration,
    ) -> Result<Claim> {
        let now = Timestamp::now().as_millis();
        let expires_at = until(now, window);
        let id = source.row.id;
        let txn = self.write_txn().await?;
        let inserted = inbound_signed::Entity::insert(inbound_signed::ActiveModel {
            source_id: Set(id),
            digest: Set(digest.to_owned()),
            tenant_id: Set(source.row.tenant_id),
            event_id: Set(event_id.map(str::to_owned)),
            expires_at: Set(expires_at),
        })
        .on_conflict(
            OnConflict::columns([
                inbound_signed::Column::SourceId,
                inbound_signed::Column::Digest,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(&*txn)
        .await?;
        if inserted == 1 {
            txn.commit().await?;
            return Ok(Claim::Fresh { expires_at });
        }
        let seen = inbound_signed::Entity::find()
            .filter(inbound_signed::Column::SourceId.eq(id))
            .filter(inbound_signed::Column::Digest.eq(digest))
            .lock_exclusive()
            .one(&*txn)
            .await?
            .ok_or_else(|| StoreError::Corrupt("an inbound digest vanished".into()))?;
        if seen.expires_at <= now {
            inbound_signed::Entity::update_many()
                .col_expr(
                    inbound_signed::Column::EventId,
                    Expr::value(event_id.map(str::to_owned)),
                )
                .col_expr(inbound_signed::Column::ExpiresAt, Expr::value(expires_at))
                .filter(inbound_signed::Column::SourceId.eq(id))
                .filter(inbound_signed::Column::Digest.eq(digest))
                .exec(&*txn)
                .await?;
            txn.commit().await?;
            return Ok(Claim::Fresh { expires_at });
        }
        drop(txn);
        Ok(match (event_id, seen.event_id.as_deref()) {
            (Some(mine), Some(theirs)) if mine == theirs => Claim::Same,
            _ => Claim::Replay,
        })
    }

    /// Lets a digest recorded by [`Store::claim_signed`] go, when its event was not taken:
    /// the sender's retry must not be a replay. A later claim of it is left alone.
    pub async fn release_signed(
        &self,
        source: SourceId,
        digest: &str,
        expires_at: i64,
    ) -> Result<()> {
        let txn = self.write_txn().await?;
        inbound_signed::Entity::delete_many()
            .filter(inbound_signed::Column::SourceId.eq(source))
            .filter(inbound_signed::Column::Digest.eq(digest))
            .filter(inbound_signed::Column::ExpiresAt.eq(expires_at))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }
}

/// What one process counted of a source since it last wrote its counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub duplicates: u64,
    pub refused: u64,
    pub last_refused_at: Option<i64>,
    /// Refusals not recorded for the Requests view (past the recording bound).
    pub unrecorded: u64,
}

impl System<'_> {
    /// Adds counts to their sources (a source deleted meanwhile is skipped).
    pub async fn add_source_tallies(&self, tallies: &[(SourceId, Tally)]) -> Result<()> {
        if tallies.is_empty() {
            return Ok(());
        }
        let txn = self.write_txn().await?;
        for (id, t) in tallies {
            let mut update = inbound_source::Entity::update_many()
                .col_expr(
                    inbound_source::Column::Duplicates,
                    Expr::col(inbound_source::Column::Duplicates).add(t.duplicates as i64),
                )
                .col_expr(
                    inbound_source::Column::Refused,
                    Expr::col(inbound_source::Column::Refused).add(t.refused as i64),
                )
                .col_expr(
                    inbound_source::Column::Unrecorded,
                    Expr::col(inbound_source::Column::Unrecorded).add(t.unrecorded as i64),
                );
            if let Some(at) = t.last_refused_at {
                update = update.col_expr(inbound_source::Column::LastRefusedAt, Expr::value(at));
            }
            update
                .filter(inbound_source::Column::Id.eq(*id))
                .exec(&*txn)
                .await?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// Keys with held events, the longest waiting first, at most `limit`: what the periodic
    /// forwarding pass looks at (a gap whose hold time passed, a key a dead process held).
    pub async fn keys_with_held_inbound(&self, limit: u64) -> Result<Vec<(SourceId, String)>> {
        let sql = format!(
            "SELECT source_id, ordering_key FROM inbound_held \
             GROUP BY source_id, ordering_key ORDER BY MIN(held_at) LIMIT {limit}"
        );
        let rows = self
            .db
            .query_all(Statement::from_string(self.db.get_database_backend(), sql))
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("", "source_id")?, r.try_get("", "ordering_key")?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(seq: i64, held_at: i64) -> inbound_held::Model {
        inbound_held::Model {
            source_id: SourceId::new(),
            ordering_key: "k".into(),
            seq,
            tenant_id: TenantId::new(),
            held_at,
            event_id: None,
            event_type: "t".into(),
            payload: Vec::new(),
        }
    }

    fn seqs(t: &Turn) -> Vec<i64> {
        t.events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn a_turn_is_the_unbroken_run_from_the_keys_place_and_a_gap_waits_its_hold_time() {
        let hold = Duration::from_secs(60);
        let now = Timestamp::from_millis(1_000_000);
        let fresh = now.as_millis() - 1_000;
        let old = now.as_millis() - 61_000;
        // In sequence: everything up to the first gap.
        let t = take_turn(
            3,
            vec![held(3, fresh), held(4, fresh), held(6, old)],
            hold,
            now,
        );
        assert_eq!((seqs(&t), t.gap), (vec![3, 4], None));
        // Behind the key's place (late or repeated) goes first, then the run.
        let t = take_turn(3, vec![held(2, fresh), held(3, fresh)], hold, now);
        assert_eq!(seqs(&t), vec![2, 3]);
        // Ahead of a gap, not yet held long enough: nothing.
        let t = take_turn(3, vec![held(5, fresh), held(6, fresh)], hold, now);
        assert_eq!((seqs(&t), t.gap), (vec![], None));
        // Held long enough: the gap (3..4) is given up and the run from 5 goes.
        let t = take_turn(
            3,
            vec![held(5, old), held(6, fresh), held(8, old)],
            hold,
            now,
        );
        assert_eq!((seqs(&t), t.gap), (vec![5, 6], Some((3, 4))));
    }
}
