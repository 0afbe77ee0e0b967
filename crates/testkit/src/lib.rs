//! Test support shared by hookd's suites (decisions 45): [`TestApp`], the real application
//! in-process over a fresh database with a tenant and a JSON client, and [`smtp`], a real
//! SMTP server on loopback.

mod app;
pub mod smtp;

pub use app::{Resp, TestApp, init_test_log, new_tenant};
