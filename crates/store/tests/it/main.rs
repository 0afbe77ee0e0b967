//! Storage tests. Each runs on SQLite and, when HOOKD_TEST_POSTGRES_URL is set, on PostgreSQL.

mod egress;
mod helpers;
mod ids;
mod ops;
mod resources;
mod retention;
mod sealed;
mod tenants;
mod traffic;
