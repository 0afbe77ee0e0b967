use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, Settings};

/// Installs the global subscriber: text or JSON lines on stderr, filtered by `log_level`.
pub fn init(settings: &Settings) {
    let filter = EnvFilter::try_new(&settings.log_level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // A second init (tests running several commands in one process) is harmless.
    let _ = match settings.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
