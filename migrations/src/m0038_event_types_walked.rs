//! No index of messages by event type, on either database (issue 37 item 2, decisions 109).
//!
//! `idx_messages_event_type (app_id, event_type, id)` cost 70 B a message on PostgreSQL and 61
//! B on SQLite, the largest index left. A listing by event type now walks the application's
//! messages (`idx_messages_app`) and checks each one's type, as a channel or a tag is checked:
//! at most 5,000 messages a page (decisions 107), a page with fewer matches ending not done at
//! the window's edge. Svix's own server has no such index either: it walks the application's
//! messages until its page fills.

use sea_orm_migration::prelude::*;

statements_migration!("m0038_event_types_walked");

const UP: &[&str] = &["DROP INDEX idx_messages_event_type"];

const DOWN: &[&str] =
    &["CREATE INDEX idx_messages_event_type ON messages (app_id, event_type, id)"];
