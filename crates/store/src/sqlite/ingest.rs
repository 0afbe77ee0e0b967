//! New messages on SQLite: written by the writer thread, in its write turn (decisions 25).

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use sea_orm::{DbBackend, QueryTrait};

use crate::entities::{delivery, message};
use crate::ingest::{
    Created, Handoff, IngestJob, Input, answer_one, answer_or_split, assemble, by_app,
    enabled_endpoints, ordered_targets, plan, split, to_insert,
};
use crate::traffic::next_sequence_upsert;
use crate::{Result, Store, StoreError};

/// Writes a batch on the SQLite thread's connection, in the write turn, and answers every job.
pub(crate) fn write_lite_batch(
    store: &Store,
    conn: &mut rusqlite::Connection,
    jobs: Vec<IngestJob>,
) {
    let (inputs, replies) = split(jobs);
    // Checked again here, at the batch: jobs queue while the one before is written, and the
    // disk may have reached its floor (or the WAL index been lost) meanwhile.
    if let Err(StoreError::Refused { fault, why }) = store.health.take_message_batch() {
        for reply in replies {
            let _ = reply.send(Err(StoreError::Refused {
                fault,
                why: why.clone(),
            }));
        }
        return;
    }
    let handoff = store.current_handoff();
    let keys = &store.seal;
    let written = create_messages_lite(conn, &inputs, handoff.as_ref(), keys);
    for (input, reply) in answer_or_split(store, inputs, replies, written) {
        let one = std::slice::from_ref(&input);
        answer_one(
            reply,
            create_messages_lite(conn, one, handoff.as_ref(), keys),
        );
    }
}

/// [`Store::create_messages`] on the SQLite thread's connection, in the write turn.
pub(crate) fn create_messages_lite(
    conn: &mut rusqlite::Connection,
    inputs: &[Input],
    handoff: Option<&Handoff>,
    keys: &domain::seal::Keyring,
) -> Result<Created> {
    use crate::lite;
    let backend = DbBackend::Sqlite;
    let txn = lite::begin(conn)?;
    let now = Timestamp::now();
    let endpoints = enabled_endpoints(inputs).build(backend);
    let endpoints_of = by_app(lite::query_endpoints(&txn, &endpoints)?);
    let planned = plan(inputs, &endpoints_of, now);
    static MESSAGE_SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static DELIVERY_SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let message_sql =
        MESSAGE_SQL.get_or_init(|| lite::insert_sql::<message::Entity>(" ON CONFLICT DO NOTHING"));
    let delivery_sql = DELIVERY_SQL.get_or_init(|| lite::insert_sql::<delivery::Entity>(""));
    let mut inserted = HashSet::new();
    for m in to_insert(&planned) {
        // Skipped (0 rows) when its eventId is taken.
        if lite::insert_row::<message::Entity>(&txn, message_sql, m)? == 1 {
            inserted.insert(m.id);
        }
    }
    let mut seqs = HashMap::new();
    for (at, (tenant, endpoint_id, key)) in ordered_targets(&planned, inputs, &inserted) {
        let upsert = backend.build(&next_sequence_upsert(tenant, endpoint_id, key));
        seqs.insert(at, lite::query_i64(&txn, &upsert)?);
    }
    let mut created = assemble(planned, inputs, &inserted, &seqs, handoff.cloned(), now);
    for d in &created.deliveries {
        lite::insert_row::<delivery::Entity>(&txn, delivery_sql, d)?;
    }
    if let Some(secrets) = created.secrets_query() {
        let secrets = lite::query_secrets(&txn, &secrets.build(backend))?;
        created.attach_endpoints(endpoints_of, secrets, now, keys);
    }
    txn.commit()?;
    Ok(created)
}
