//! End-to-end tests of the `hookd` binary as a user runs it.

mod abuse;
mod api;
mod bench;
mod brokers;
mod cli;
mod crash;
mod delivery;
mod disabled;
mod egress;
mod endpoint_auth;
mod flow;
mod health;
mod helpers;
mod inbound;
mod ingest;
mod integrations;
mod metrics;
mod operational;
mod portal;
mod retention;
mod scaleout;
mod secrets;
mod serve;
mod storage;
mod telemetry;
mod warnings;
