//! On PostgreSQL, a delivery handed to the dispatcher as its message is written gets no row
//! in `deliveries` while it is in flight: the batch writes one `handoffs` row instead, its
//! journal (issue 37 item 3, decisions 113).
//!
//! A handed-off delivery that succeeds (nearly all of them) leaves its success attempt and
//! nothing else: its delivery row was inserted with the message and deleted with the result
//! (m0034), an insert, three index entries and a delete per delivery. The journal row holds
//! the batch's handed deliveries as arrays (ids, messages, endpoints, give-up times), is
//! deleted once they are all done or written out, and stands for them should the process die:
//! a journal whose lease ran out is turned into pending deliveries, less those that succeeded
//! (see `store::postgres::journal`).
//!
//! The arrays are stored uncompressed (`EXTERNAL`): ids do not compress, and a small batch's
//! journal fits in its row. The index on the expiry is the reaper's; it costs one entry per
//! batch, not per delivery. SQLite keeps writing every delivery's row (its writes are cheap).
//! `down` refuses while a journal is left (a process was killed and none has run since):
//! start hookd once, whose reaper turns them into deliveries, then migrate down.

use sea_orm_migration::prelude::*;

statements_migration!("m0039_handoff_journal", postgres_only);

const UP: &[&str] = &[
    "CREATE TABLE handoffs (id uuid PRIMARY KEY, owner text NOT NULL, \
       expires_at bigint NOT NULL, created_at bigint NOT NULL, delivery_ids uuid[] NOT NULL, \
       msg_ids uuid[] NOT NULL, endpoint_ids uuid[] NOT NULL, give_up_at bigint[] NOT NULL)",
    "ALTER TABLE handoffs ALTER COLUMN delivery_ids SET STORAGE EXTERNAL, \
       ALTER COLUMN msg_ids SET STORAGE EXTERNAL, ALTER COLUMN endpoint_ids SET STORAGE EXTERNAL, \
       ALTER COLUMN give_up_at SET STORAGE EXTERNAL",
    // The reaper's: journals whose lease ran out, without reading the live ones (or, with
    // autovacuum off, the deleted ones until hookd's next VACUUM).
    "CREATE INDEX idx_handoffs_expires ON handoffs (expires_at)",
];

const DOWN: &[&str] = &[
    "DO $$ BEGIN IF EXISTS (SELECT 1 FROM handoffs) THEN RAISE EXCEPTION \
       'deliveries handed off by a process that did not stop are still journaled in handoffs: \
        start hookd once (its reaper writes them out), then migrate down'; END IF; END $$",
    "DROP TABLE handoffs",
];
