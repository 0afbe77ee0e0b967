//! `/sources`: the tenant's inbound sources (issue 21): where senders post, how requests are
//! verified, which application forwards the events, and a link to the events each received.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};

use crate::auth::SignupConfig;
use crate::error::PageError;
use crate::session::{self, Session};
use crate::views::{self, SourceRow, SourcesPage};
use crate::when::When;

/// GET `/sources`.
pub async fn list(req: HttpRequest, session: Session) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let public_url = req
        .app_data::<web::Data<SignupConfig>>()
        .map(|c| c.public_url.clone())
        .unwrap_or_default();
    let sources = store.list_sources(session.tenant).await?;
    let held: std::collections::HashMap<_, _> = store
        .held_inbound_counts(session.tenant)
        .await?
        .into_iter()
        .map(|(id, n, since)| (id, (n, since)))
        .collect();
    let now = domain::Timestamp::now().as_millis();
    let mut rows = Vec::with_capacity(sources.len());
    // Sources often share an application: each is read once.
    let mut apps = std::collections::HashMap::new();
    for s in sources {
        let app = match apps.get(&s.row.app_id) {
            Some(a) => a,
            None => {
                let a = store
                    .get_application(session.tenant, &s.row.app_id.to_string())
                    .await?;
                apps.entry(s.row.app_id).or_insert(a)
            }
        };
        let app: store::entities::application::Model = app.clone();
        let tag = domain::inbound::source_tag(&s.row.name);
        let o = &s.settings.ordering;
        let ordering = match (&o.key_pointer, &o.sequence_pointer, o.hold_gap_secs) {
            (_, _, 0) => "arrival order".to_owned(),
            (None, None, hold) => format!("by webhook-ordering-key; gaps held {hold} s"),
            (k, q, hold) => format!(
                "key {}, sequence {}; gaps held {hold} s",
                k.as_deref().unwrap_or("webhook-ordering-key"),
                q.as_deref().unwrap_or("webhook-sequence")
            ),
        };
        let held = held
            .get(&s.row.id)
            .map(|(n, since)| format!("{n}, the oldest for {} s", (now - since).max(0) / 1000));
        rows.push(SourceRow {
            ordering,
            held,
            duplicates: s.row.duplicates,
            refused: s.row.refused,
            last_refused: s.row.last_refused_at.map(When::at_ms),
            url: domain::inbound::source_url(&public_url, &s.row.id),
            scheme: match s.settings.signed_tolerance() {
                Some(t) => format!(
                    "{}, timestamps within {} s",
                    s.settings.scheme.name(),
                    t.as_secs()
                ),
                None => s.settings.scheme.name().to_owned(),
            },
            event_type: s.row.event_type.clone(),
            events_href: format!(
                "{}/app/{}/msg?tag={}",
                session.root,
                app.id,
                views::query_value(&tag)
            ),
            app_id: app.id.to_string(),
            app_name: app.name,
            created: When::at_ms(s.row.created_at),
            name: s.row.name,
        });
    }
    let view = SourcesPage {
        csrf: Some(session.csrf),
        root: session.root,
        sources: rows,
    };
    Ok(views::render(StatusCode::OK, &view)?)
}
