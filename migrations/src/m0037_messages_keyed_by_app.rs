//! On PostgreSQL, a message's primary key is `(app_id, id)`, the index an application's
//! messages were already read through, and the index of the id alone is dropped (issue 37 item
//! 2, decisions 108).
//!
//! Every read of a message names its application: the API's and the dashboard's pages are an
//! application's, the dispatcher loads a claimed delivery's message through its endpoint's
//! application, retention walks one application at a time, and the probes of a listing's
//! labels name the application of the listing. So `messages_pkey (id)` was only kept for
//! uniqueness: 34 B a message. Message ids are ULIDs made by the process that writes the
//! message, so `(app_id, id)` is as unique. The constraint keeps the name `idx_messages_app`
//! that the plans name.
//!
//! SQLite is left alone (its 695–702 B a message meet the target). `down` puts the key on the
//! id back and the application's index beside it.

use sea_orm_migration::prelude::*;

statements_migration!("m0037_messages_keyed_by_app", postgres_only);

const UP: &[&str] = &[
    "DROP INDEX idx_messages_app",
    "ALTER TABLE messages DROP CONSTRAINT messages_pkey, \
       ADD CONSTRAINT idx_messages_app PRIMARY KEY (app_id, id)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE messages DROP CONSTRAINT idx_messages_app, \
       ADD CONSTRAINT messages_pkey PRIMARY KEY (id)",
    "CREATE INDEX idx_messages_app ON messages (app_id, id)",
];
