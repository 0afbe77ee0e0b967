//! On PostgreSQL, an attempt's primary key is `(msg_id, id)`, the index its message's attempts
//! were already read through, and the index of the id alone is dropped (issue 37 item 2).
//!
//! Every read of one attempt names its message (the API's and the dashboard's attempt pages,
//! the expunge of an attempt's response), and every other read goes through a message or an
//! endpoint, so `attempts_pkey (id)` was only kept for uniqueness: 34 B an attempt. Attempt
//! ids are ULIDs made by the one dispatcher that writes the attempt, so `(msg_id, id)` is as
//! unique. The constraint keeps the name `idx_attempts_msg` that the plans name.
//!
//! SQLite is left alone: its attempts are already clustered by id (m0035), and its 695 B a
//! message meet the target. `down` puts the key on the id back and the message index beside it.

use sea_orm_migration::prelude::*;

statements_migration!("m0036_attempts_keyed_by_message", postgres_only);

const UP: &[&str] = &[
    "DROP INDEX idx_attempts_msg",
    "ALTER TABLE attempts DROP CONSTRAINT attempts_pkey, \
       ADD CONSTRAINT idx_attempts_msg PRIMARY KEY (msg_id, id)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE attempts DROP CONSTRAINT idx_attempts_msg, \
       ADD CONSTRAINT attempts_pkey PRIMARY KEY (id)",
    "CREATE INDEX idx_attempts_msg ON attempts (msg_id, id)",
];
