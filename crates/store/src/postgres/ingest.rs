//! New messages on PostgreSQL: a group-committing writer on the pool, and the one statement
//! that writes a batch (decisions 30, 120).

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use domain::ids::{DeliveryId, EndpointId, MessageId, SecretId, TenantId};
use tokio::sync::mpsc;

use crate::entities::{delivery, endpoint_secret, message};
use crate::ingest::{
    Created, Handoff, IngestJob, Input, MAX_BATCH, answer_one, answer_or_split, assemble, by_app,
    enabled_endpoints, ordered_targets, plan, split, to_insert,
};
use crate::pg::ColumnArray;
use crate::{Result, Store, StoreError};

/// Starts the writer for `store` (PostgreSQL; SQLite's is the `lite` thread) on a thread of
/// its own, with a runtime of its own and one session of its own on `url`, opened there when
/// first used (decisions 122). On the serving runtime it was one task among the dispatcher's
/// hundreds: each of its two round trips per batch waited in a worker's queue behind sending
/// tasks before it saw its answer, and every request of the batch waited with it. `store` must
/// not hold the sender itself, or the writer would never see the channel close: the thread
/// ends when it does. Returns where to send jobs.
pub(crate) fn spawn_writer(
    store: Store,
    url: &str,
    opts: &crate::connect::ConnectOptions,
) -> Result<mpsc::Sender<IngestJob>> {
    let cannot_start = |e| StoreError::not_started("the message writer", e);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(cannot_start)?;
    // One batch at a time, its statements one after another: one session is all it uses.
    // Made inside the writer's runtime, so the pool's own task (sqlx's reaper of idle and old
    // sessions) runs on that thread too, not on the caller's runtime.
    let db = {
        let _writers = runtime.enter();
        super::connect::open_lazy(url, 1, opts, &store.health)?
    };
    let (tx, rx) = mpsc::channel::<IngestJob>(MAX_BATCH * 4);
    let store = Store { db, ..store };
    std::thread::Builder::new()
        .name("hookd-ingest".into())
        .spawn(move || runtime.block_on(pool_writer(store, rx)))
        .map_err(cannot_start)?;
    Ok(tx)
}

/// Writes one batch at a time: whatever arrived while a batch was written is the next one.
/// With the write down to two round trips (decisions 30), a second batch in flight only made
/// every batch smaller and each message dearer to PostgreSQL (decisions 120, undoing 27).
async fn pool_writer(store: Store, mut rx: mpsc::Receiver<IngestJob>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut jobs, MAX_BATCH).await > 0 {
        let (store, batch) = (store.clone(), std::mem::take(&mut jobs));
        // A task of its own, as before, so that a panic in one batch ends that batch only.
        let _ = tokio::spawn(async move { store.write_batch(batch).await }).await;
    }
}

impl Store {
    /// Writes a batch on the pool and answers every job (see [`answer_or_split`]).
    async fn write_batch(&self, jobs: Vec<IngestJob>) {
        let handoff = self.current_handoff();
        let (inputs, replies) = split(jobs);
        let written = self.create_messages_at_once(&inputs, handoff).await;
        for (input, reply) in answer_or_split(self, inputs, replies, written) {
            let one = std::slice::from_ref(&input);
            answer_one(reply, self.create_messages_at_once(one, None).await);
        }
    }

    /// Creates a batch of messages on PostgreSQL, its one write path: two round trips and no
    /// explicit transaction. The endpoints are read, then one statement inserts the messages
    /// and their deliveries, numbers the ordered ones (one upsert of each key's counter, locked
    /// in key order, so writers on several nodes cannot deadlock) and reads the handed-off
    /// endpoints' secrets. A single statement is atomic and durable when it returns, and sees
    /// what a READ COMMITTED transaction's statements would (decisions 30). The six round trips
    /// of a transaction (BEGIN, four statements, COMMIT) were most of an ingest request's time
    /// at 1,000 msg/s. An `Err` of the whole means nothing was written.
    pub(crate) async fn create_messages_at_once(
        &self,
        inputs: &[Input],
        handoff: Option<Handoff>,
    ) -> Result<Created> {
        let now = Timestamp::now();
        let endpoints = enabled_endpoints(inputs).all(&self.db).await?;
        let endpoints_of = by_app(endpoints);
        let planned = plan(inputs, &endpoints_of, now);
        let rows = to_insert(&planned);
        if rows.is_empty() {
            return Ok(assemble(
                planned,
                inputs,
                &HashSet::new(),
                &HashMap::new(),
                None,
                now,
            ));
        }
        let mut arrays = crate::pg::columns_of::<message::Entity>(rows.iter().copied());
        // Assembled as if every message were new; those whose eventId turns out to be taken
        // are taken back out below (their deliveries are not inserted either).
        let every: HashSet<MessageId> = rows.iter().map(|m| m.id).collect();
        // Ordered deliveries carry their rank in the batch as `seq` (which also keeps them
        // from being handed off); the statement turns ranks into each key's next numbers.
        let ranks: HashMap<(usize, usize), i64> = ordered_targets(&planned, inputs, &every)
            .into_iter()
            .enumerate()
            .map(|(rank, (at, _))| (at, rank as i64))
            .collect();
        let mut created = assemble(planned, inputs, &every, &ranks, handoff, now);
        arrays.extend(crate::pg::columns_of::<delivery::Entity>(
            created.deliveries.iter(),
        ));
        arrays.push(ColumnArray::Uuid(Vec::new()).filled(created.handed_endpoints().into_iter()));
        // One text for every batch, so it is parsed and planned once per connection.
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql = SQL.get_or_init(create_messages_sql).as_str();
        let row = crate::pg::query_with_arrays(&self.db, sql, Vec::new(), arrays)
            .await?
            .pop()
            .ok_or_else(|| StoreError::Corrupt("the message write returned no row".into()))?;
        let parse = |col: &str| -> Result<serde_json::Value> {
            let text: String = row.try_get("", col)?;
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string()))
        };
        let inserted: Vec<String> = serde_json::from_value(parse("ids")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let inserted: HashSet<MessageId> = inserted
            .iter()
            .map(|t| crate::pg::id_from_uuid_text(t).map_err(StoreError::Corrupt))
            .collect::<Result<_>>()?;
        created.keep_only(&inserted);
        // Before any is handed over: a result may come back at once.
        let journal: Option<String> = row.try_get("", "journal")?;
        if let (Some(journal), Some(h)) = (journal, &created.handoff) {
            let journal = crate::pg::id_from_uuid_text(&journal).map_err(StoreError::Corrupt)?;
            self.journal
                .record(journal, &h.owner, &created.handed_ids());
        }
        let seqs: Vec<(String, i64)> = serde_json::from_value(parse("seqs")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let seqs: HashMap<DeliveryId, i64> = seqs
            .iter()
            .map(|(t, seq)| {
                Ok((
                    crate::pg::id_from_uuid_text(t).map_err(StoreError::Corrupt)?,
                    *seq,
                ))
            })
            .collect::<Result<_>>()?;
        created.number(seqs);
        if !created.handed.is_empty() {
            let secrets = secret_rows(parse("secrets")?)?;
            created.attach_endpoints(endpoints_of, secrets, now, &self.seal);
        }
        Ok(created)
    }
}

/// The statement of [`Store::create_messages_at_once`]. Only ordered deliveries are ranked
/// (each key's counter ends at its last number; this batch's share counts up to it), so a
/// batch without ordering keys sorts nothing. Its parameters are binary arrays, one per column
/// (see [`ColumnArray`]): the messages' in their entity's column order, payloads included, then
/// their deliveries' (ordered ones with their batch rank as `seq`), then the handed-off
/// endpoints. The handed-off deliveries (written `sending`) are not inserted: their batch's
/// journal is (see `journal`). Returns the inserted message ids, the handed endpoints' secrets
/// and each ordered delivery's number, as JSON texts, and the journal's id.
fn create_messages_sql() -> String {
    use crate::pg::{column_names, columns_of, unnest};
    let message_names = column_names::<message::Entity>();
    let messages = columns_of::<message::Entity>(std::iter::empty());
    let columns = column_names::<delivery::Entity>();
    let deliveries = columns_of::<delivery::Entity>(std::iter::empty());
    let handed = 1 + messages.len() + deliveries.len();
    let values: Vec<String> = columns
        .iter()
        .map(|c| match c.as_str() {
            "seq" => "o.seq".to_owned(),
            c => format!("r.{c}"),
        })
        .collect();
    format!(
        "WITH m AS (INSERT INTO messages ({message_columns}) SELECT * FROM {message_rows} \
         ON CONFLICT DO NOTHING RETURNING id), \
       r AS (SELECT * FROM {delivery_rows} WHERE msg_id IN (SELECT id FROM m)), \
       k AS (SELECT endpoint_id, ordering_key, tenant_id, COUNT(*) AS n \
         FROM r WHERE ordering_key IS NOT NULL GROUP BY endpoint_id, ordering_key, tenant_id), \
       s AS (INSERT INTO ordering_sequences (endpoint_id, ordering_key, tenant_id, last_seq) \
         SELECT endpoint_id, ordering_key, tenant_id, n FROM k \
         ORDER BY endpoint_id, ordering_key \
         ON CONFLICT (endpoint_id, ordering_key) \
         DO UPDATE SET last_seq = ordering_sequences.last_seq + EXCLUDED.last_seq \
         RETURNING endpoint_id, ordering_key, last_seq), \
       d AS (INSERT INTO deliveries ({columns}) SELECT {values} FROM r \
         LEFT JOIN (SELECT r.id, s.last_seq - k.n + ROW_NUMBER() OVER \
             (PARTITION BY r.endpoint_id, r.ordering_key ORDER BY r.seq) AS seq \
           FROM r JOIN k USING (endpoint_id, ordering_key) \
           JOIN s USING (endpoint_id, ordering_key)) o ON o.id = r.id \
         WHERE r.state <> '{sending}' RETURNING id, seq), \
       j AS (INSERT INTO handoffs (id, owner, expires_at, created_at, delivery_ids, msg_ids, \
           endpoint_ids, give_up_at) \
         SELECT (array_agg(id))[1], min(lease_owner), max(lease_expires_at), min(created_at), \
           array_agg(id), array_agg(msg_id), array_agg(endpoint_id), array_agg(give_up_at) \
         FROM r WHERE state = '{sending}' HAVING COUNT(*) > 0 RETURNING id) \
       SELECT CAST(COALESCE((SELECT json_agg(id) FROM m), '[]') AS text) AS ids, \
         CAST(COALESCE((SELECT json_agg(s) FROM endpoint_secrets s WHERE s.endpoint_id \
           = ANY(CAST(${handed} AS uuid[]))), '[]') \
           AS text) AS secrets, \
         CAST(COALESCE((SELECT json_agg(json_build_array(id, seq)) FROM d \
           WHERE seq IS NOT NULL), '[]') AS text) AS seqs, \
         CAST((SELECT id FROM j) AS text) AS journal",
        sending = domain::delivery::DeliveryState::Sending.as_str(),
        message_columns = message_names.join(", "),
        message_rows = unnest(&messages, 1, "r", &message_names),
        delivery_rows = unnest(&deliveries, 1 + messages.len(), "r", &columns),
        columns = columns.join(", "),
        values = values.join(", "),
    )
}

/// `endpoint_secrets` rows from PostgreSQL's `json_agg`.
fn secret_rows(json: serde_json::Value) -> Result<Vec<endpoint_secret::Model>> {
    #[derive(serde::Deserialize)]
    struct Row {
        #[serde(deserialize_with = "crate::pg::uuid_id")]
        id: SecretId,
        #[serde(deserialize_with = "crate::pg::uuid_id")]
        tenant_id: TenantId,
        #[serde(deserialize_with = "crate::pg::uuid_id")]
        endpoint_id: EndpointId,
        secret: String,
        created_at: i64,
        expires_at: Option<i64>,
    }
    let rows: Vec<Row> =
        serde_json::from_value(json).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(rows
        .into_iter()
        .map(|r| endpoint_secret::Model {
            id: r.id,
            tenant_id: r.tenant_id,
            endpoint_id: r.endpoint_id,
            secret: r.secret,
            created_at: r.created_at,
            expires_at: r.expires_at,
        })
        .collect())
}
