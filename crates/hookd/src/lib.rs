//! The hookd binary's library half: settings, the command line, and the wiring of roles.

pub mod cli;
pub mod config;
pub mod http_limits;
pub mod in_process;
pub mod metrics;
pub mod signals;
pub mod startup;
pub mod telemetry;
