//! Recording what inbound sources refuse, for each source's Requests view, without letting a
//! flood of bad requests from anyone on the internet cost the server: a refused request costs
//! a map lookup under a lock; at most [`RECORD_PER_SOURCE`] per source and [`RECORD_MAX`] in
//! all are kept between writes (the rest only counted, per source), and each receiving process
//! writes what it kept once a second, in one transaction (`inbound::write_counts`).

use std::collections::HashMap;

use domain::Timestamp;
use domain::ids::SourceId;
use domain::inbound_refusal::{Reason, excerpt};
use store::{NewRefusal, Source};

/// Refused requests recorded per source per write (a second), per receiving process.
pub const RECORD_PER_SOURCE: usize = 20;
/// Refused requests recorded in all per write, per receiving process: with the header excerpt
/// bounded to 1.5 KiB, at most ~0.5 MB waits in memory.
pub const RECORD_MAX: usize = 200;

/// What a receiving handler knows of a request besides its body.
pub struct Arrival<'a> {
    /// A header by name (any case).
    pub header: &'a dyn Fn(&str) -> Option<String>,
    /// Every header as given; read only for a refused request that is recorded.
    pub headers: &'a dyn Fn() -> Vec<(String, Vec<u8>)>,
    /// The client's address as the server saw it.
    pub remote: String,
    /// The token the request's URL carried after the source's id (`/in/{id}/{token}`).
    pub token: Option<&'a str>,
    /// The URL the sender posted to as hookd shows it (its public URL, the source's path and
    /// the request's query): what Twilio signs.
    pub url: String,
}

/// Refused requests kept since the last write.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    rows: Vec<NewRefusal>,
    per_source: HashMap<SourceId, usize>,
}

impl Recording {
    /// Keeps a refused request if the bounds allow; false: it is only counted.
    pub(crate) fn keep(
        &mut self,
        source: &Source,
        reason: Reason,
        detail: &str,
        size: u64,
        arrival: &Arrival<'_>,
    ) -> bool {
        let n = self.per_source.get(&source.row.id).copied().unwrap_or(0);
        if n >= RECORD_PER_SOURCE || self.rows.len() >= RECORD_MAX {
            return false;
        }
        self.per_source.insert(source.row.id, n + 1);
        let given = (arrival.headers)();
        let headers = excerpt(
            given.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
            &source.settings.scheme,
        );
        self.rows.push(NewRefusal {
            source_id: source.row.id,
            tenant_id: source.row.tenant_id,
            at: Timestamp::now(),
            reason,
            // The answer's text names what is wrong and never a secret; bounded all the same.
            detail: detail.chars().take(300).collect(),
            status: reason.status(),
            size,
            remote_addr: arrival.remote.chars().take(64).collect(),
            headers,
        });
        true
    }

    pub(crate) fn take(&mut self) -> Vec<NewRefusal> {
        self.per_source.clear();
        std::mem::take(&mut self.rows)
    }
}
