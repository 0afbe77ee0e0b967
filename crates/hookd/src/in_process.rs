//! How `hookd bench --in-process` (and the bench's tests) start hookd inside the bench's own
//! process: the same settings loader and [`Application`] as `hookd serve`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bench::{BoxError, Host, Server, Started};

use crate::config::{Overrides, Settings};
use crate::startup::Application;

struct InProcess;

#[async_trait::async_trait]
impl Host for InProcess {
    async fn start(&self, env: &BTreeMap<String, String>) -> Result<Started, BoxError> {
        let settings = Settings::load_from(None, env, &Overrides::default())?;
        let app = Application::build(&settings).await?;
        let port = app.port().ok_or("hookd started without its API")?;
        let stop = app.stop_handle();
        let task = tokio::spawn(async move { app.run_until_stopped().await.map_err(Into::into) });
        Ok(Started {
            port,
            stop: Box::new(move || stop.stop()),
            task,
        })
    }
}

/// The bench's server: hookd in this process.
pub fn server() -> Server {
    Server::InProcess(Arc::new(InProcess))
}
