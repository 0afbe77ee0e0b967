//! The pages (askama templates in `/templates`) and the view models they show.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use askama::Template;
use domain::Timestamp;
use domain::breaker::{BreakerConfig, BreakerPhase};
use domain::classify::StatusPreset;
use domain::delivery::DeliveryState;
use store::entities::{attempt, delivery, endpoint};

use crate::error::harden;
use crate::when::When;

/// A rendered page with the dashboard's security headers.
pub fn render(status: StatusCode, page: &impl Template) -> Result<HttpResponse, askama::Error> {
    let body = page.render()?;
    let mut resp = HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(body);
    harden(&mut resp);
    Ok(resp)
}

/// A source's page: what it is, and its Requests view (what it refused, newest first).
#[derive(Template)]
#[template(path = "source.html")]
pub struct SourcePage {
    pub csrf: Option<String>,
    pub root: &'static str,
    pub id: String,
    pub name: String,
    pub url: String,
    pub scheme: String,
    pub event_type: String,
    pub app_id: String,
    pub app_name: String,
    pub declared: bool,
    /// Refused for a bad signature, in all; and refusals a flood left unrecorded.
    pub refused: i64,
    pub unrecorded: i64,
    pub requests: Vec<RefusalRow>,
    /// Showing an older page (a link back to the newest).
    pub paged: bool,
    /// The next older page's `before`, when there is one.
    pub older: Option<String>,
    pub notice: Option<String>,
    /// The bounds: newest kept per source, days kept.
    pub kept: u64,
    pub days: u64,
}

/// A refused request as the Requests view lists it.
pub struct RefusalRow {
    pub time: When,
    pub reason: &'static str,
    pub detail: String,
    pub status: u16,
    pub size: String,
    pub remote: String,
    pub headers: Vec<(String, String)>,
}

impl RefusalRow {
    pub fn of(r: store::Refusal) -> Self {
        RefusalRow {
            time: When::at_ms(r.at.as_millis()),
            reason: r.reason.map(|r| r.label()).unwrap_or("Refused"),
            detail: r.detail,
            status: r.status,
            size: show_size(r.size),
            remote: r.remote_addr,
            headers: r.headers,
        }
    }
}

/// `0 bytes`, `512 bytes`, `1.5 KiB`, `2.0 MiB`.
pub fn show_size(n: u64) -> String {
    match n {
        0..1024 => format!("{n} bytes"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

/// The new-source and edit-source form.
#[derive(Template)]
#[template(path = "source_form.html")]
pub struct SourceFormPage {
    pub csrf: Option<String>,
    pub root: &'static str,
    /// Editing this source; none: a new one.
    pub id: Option<String>,
    /// Editing a source that has a secret (sealed: never shown, kept when left empty).
    pub secret_set: bool,
    pub current_scheme: String,
    /// The tenant's applications: (id, name).
    pub apps: Vec<(String, String)>,
    pub form: crate::sources::SourceForm,
    pub errors: crate::sources::FieldErrors,
}

impl SourceFormPage {
    /// The problem shown under `field`, if any.
    pub fn err(&self, field: &str) -> Option<&str> {
        self.errors.get(field).map(String::as_str)
    }
}

/// `csrf` in every page is the session's token: `Some` shows the logged-in chrome (log-out
/// button, htmx's CSRF header).
#[derive(Template)]
#[template(path = "message.html")]
pub struct MessagePage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub title: &'static str,
    pub text: String,
}

#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    /// The pre-session form token (double-submitted with the `hookd_form` cookie).
    pub form_token: String,
    pub email: String,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "signup_confirm.html")]
pub struct SignupConfirmPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub form_token: String,
    /// The link's token, posted back by the button.
    pub token: String,
}

#[derive(Template)]
#[template(path = "signup.html")]
pub struct SignupPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub form_token: String,
    pub name: String,
    pub email: String,
    pub errors: crate::problems::Problems,
}

#[derive(Template)]
#[template(path = "signup_done.html")]
pub struct SignupDone {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub tenant_name: String,
    pub api_key: String,
    pub base_url: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
pub struct Overview {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub tenant_name: String,
    pub apps: Vec<AppView>,
    pub more_apps: bool,
    pub attention: usize,
    pub base_url: String,
    pub notice: Option<String>,
    pub error: Option<String>,
    /// The new-application field's value (as typed, when refused).
    pub app_name: String,
    pub charts: ChartsFragment,
    /// Enabled endpoints in a failure streak, oldest first: the auto-disable's next ones.
    pub at_risk: Vec<AtRiskRow>,
}

/// An endpoint at risk of the auto-disable, on the overview.
pub struct AtRiskRow {
    pub id: String,
    pub app_id: String,
    pub url: String,
    pub failing_since: When,
    /// "3 days 4 hours", or "due now" once the next sweep disables it.
    pub time_left: String,
    pub disable_at: When,
}

pub struct AppView {
    pub id: String,
    pub name: String,
    pub uid: Option<String>,
    pub endpoints: Vec<EndpointRow>,
    pub more_endpoints: bool,
}

pub struct EndpointRow {
    pub id: String,
    pub app_id: String,
    pub url: String,
    pub description: String,
    pub status: Status,
}

/// Which buttons a page shows: everything for a tenant's user; in the portal, what the
/// token's capabilities allow (the handlers refuse the rest all the same).
#[derive(Clone, Copy, Debug)]
pub struct Can {
    /// Add, edit, enable, disable and delete endpoints, and set their authentication.
    pub manage: bool,
    pub rotate: bool,
    pub see_secret: bool,
    /// Resend, recover, replay and test events.
    pub resend: bool,
}

#[derive(Template)]
#[template(path = "endpoint.html")]
pub struct EndpointPage {
    pub csrf: Option<String>,
    pub can: Can,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    pub ep: EndpointView,
    pub notice: Option<String>,
    /// Badge, facts, deliveries by state and recent attempts: polled together.
    pub live: EndpointLive,
    /// The recover form's default: 24 hours ago, as `datetime-local` text (UTC).
    pub since_default: String,
    pub charts: ChartsFragment,
    /// Event types with an example payload, offered for the test event.
    pub example_types: Vec<String>,
    pub test_event_type: &'static str,
    /// For an ed25519 signing key, the public key receivers verify with.
    pub public_key: Option<String>,
    /// How the endpoint authenticates beyond its signature, in words.
    pub auth: String,
    /// Whether it presents a client certificate (mutual TLS).
    pub mtls: bool,
}

#[derive(Clone)]
pub struct EndpointView {
    pub id: String,
    pub url: String,
    pub description: String,
    pub status: Status,
    pub disabled: bool,
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<When>,
    pub failing_since: Option<When>,
    pub last_success_at: Option<When>,
    /// An open breaker in words (`domain::breaker::paused_words`).
    pub paused: Option<String>,
    /// The event types it receives; `None`: every event type.
    pub event_types: Option<Vec<String>>,
}

pub struct AttemptRow {
    /// Its page's last path segment.
    pub id: String,
    pub when: When,
    pub msg_id: String,
    pub number: i32,
    pub trigger: String,
    /// The HTTP status, or the kind of network error.
    pub outcome: String,
    pub ok: bool,
    pub classification: String,
    pub duration_ms: i32,
    pub detail: String,
}

#[derive(Template)]
#[template(path = "messages.html")]
pub struct MessagesPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    /// The filters as typed (empty: all).
    pub event_type: String,
    pub status: String,
    pub since: String,
    pub until: String,
    /// The offset (minutes east of UTC) `since` and `until` are shown at, and its words.
    pub tz: i32,
    pub tz_label: String,
    pub q: String,
    /// A tag filter (from the sources page's links), kept through the form.
    pub tag: String,
    pub statuses: Vec<(&'static str, &'static str)>,
    /// Filters that could not be read, each a sentence.
    pub problems: Vec<String>,
    pub filtered: bool,
    pub messages: Vec<MessageRow>,
    /// The "older" link, when another page follows.
    pub older: Option<String>,
    /// Whether this is a later page (offers a link back to the newest).
    pub paged: bool,
    /// The first page, with the same filter.
    pub newest: String,
    /// The endpoint whose log this is (empty: the whole application's), and its URL.
    pub endpoint_id: String,
    pub endpoint_url: Option<String>,
    /// The quick ranges, each a link keeping the other filters.
    pub presets: Vec<RangePreset>,
    /// The log without filters (still scoped to its endpoint).
    pub clear: String,
    /// Whether some deliveries' statuses were left out (a page reached the statuses' bound).
    pub statuses_cut: bool,
}

pub struct RangePreset {
    pub label: &'static str,
    pub href: String,
    pub current: bool,
}

pub struct MessageRow {
    pub id: String,
    pub event_type: String,
    pub event_id: Option<String>,
    pub when: When,
    /// One per delivery shown: the message's status at each endpoint.
    pub statuses: Vec<StatusCell>,
}

/// A message's status at one endpoint, in a log row: what happened and what comes next.
pub struct StatusCell {
    pub label: &'static str,
    pub class: &'static str,
    /// For a delivery still to be tried: when.
    pub next: Option<NextTry>,
    /// The endpoint, when the log shows several.
    pub url: Option<String>,
}

/// A delivery's next try, as a log row says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextTry {
    Now,
    At(When),
}

impl std::fmt::Display for NextTry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NextTry::Now => f.write_str("next try now"),
            NextTry::At(at) => write!(f, "next try {at}"),
        }
    }
}

/// Fixed words and a [`When`]: nothing to escape.
impl askama::filters::HtmlSafe for NextTry {}

impl StatusCell {
    pub fn of(d: &delivery::Model, url: Option<String>, now: Timestamp) -> StatusCell {
        let (label, class) = match d.state {
            DeliveryState::Succeeded => ("Delivered", "healthy"),
            // Tried and failed, with tries left.
            DeliveryState::Pending if d.attempt_count > d.attempts_at_arm => ("Failing", "failing"),
            DeliveryState::Pending => ("Pending", "open"),
            DeliveryState::Sending => ("Sending", "open"),
            DeliveryState::Failed => ("Dead", "failing"),
            DeliveryState::Paused => ("Paused", "disabled"),
            DeliveryState::Skipped => ("Skipped", "disabled"),
        };
        let next = (d.state == DeliveryState::Pending).then(|| {
            if d.next_attempt_at <= now.as_millis() {
                NextTry::Now
            } else {
                NextTry::At(When::at_ms(d.next_attempt_at))
            }
        });
        StatusCell {
            label,
            class,
            next,
            url,
        }
    }
}

#[derive(Template)]
#[template(path = "message_detail.html")]
pub struct MessageDetail {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    pub id: String,
    pub event_type: String,
    pub event_id: Option<String>,
    pub when: When,
    /// The payload as shown (see [`payload_view`]); escaped by the template.
    pub payload: PayloadView,
    pub notice: Option<String>,
    pub deliveries: DeliveriesFragment,
}

/// A message's deliveries with their attempts, also served alone for polling: states,
/// next tries and attempts come from one request, so they agree.
#[derive(Template)]
#[template(path = "message_deliveries.html")]
pub struct DeliveriesFragment {
    pub csrf: Option<String>,
    pub can: Can,
    pub root: &'static str,
    pub app_id: String,
    /// The message's id.
    pub id: String,
    pub deliveries: Vec<DeliveryView>,
    /// Some attempts were left out (more than one query's worth).
    pub more_attempts: bool,
}

pub struct DeliveryView {
    pub endpoint_id: String,
    /// The endpoint's URL, or `None` when it has been deleted.
    pub url: Option<String>,
    pub state: String,
    /// Badge class for the state.
    pub class: &'static str,
    pub next_attempt: Option<When>,
    pub attempts: Vec<AttemptRow>,
}

#[derive(Template)]
#[template(path = "sources.html")]
pub struct SourcesPage {
    pub csrf: Option<String>,
    pub root: &'static str,
    pub sources: Vec<SourceRow>,
    pub notice: Option<String>,
}

/// An inbound source as the sources page lists it.
pub struct SourceRow {
    pub id: String,
    pub name: String,
    /// Declared by a configuration file: read-only here.
    pub declared: bool,
    /// Where the sender posts.
    pub url: String,
    pub scheme: String,
    pub event_type: String,
    pub app_id: String,
    pub app_name: String,
    /// The application's messages with this source's tag: the events it received.
    pub events_href: String,
    pub created: When,
    /// How events of one key are ordered.
    pub ordering: String,
    /// Events waiting ahead of a gap: how many, and for how long the oldest.
    pub held: Option<String>,
    /// Repeats acknowledged without effect; requests refused for a bad signature (the last
    /// when).
    pub duplicates: i64,
    pub refused: i64,
    pub last_refused: Option<When>,
}

#[derive(Template)]
#[template(path = "dead_letters.html")]
pub struct DeadLettersPage {
    pub csrf: Option<String>,
    pub can: Can,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    pub ep_id: String,
    pub ep_url: String,
    pub notice: Option<String>,
    pub rows: Vec<DeadLetterRow>,
    pub older: Option<String>,
    pub paged: bool,
}

pub struct DeadLetterRow {
    pub msg_id: String,
    pub event_type: String,
    pub created: When,
    pub attempts: i32,
    pub last_outcome: String,
    pub last_attempt: Option<When>,
}

#[derive(Template)]
#[template(path = "settings.html")]
pub struct SettingsPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub tenant_name: String,
    /// The notification email, stored or as typed.
    pub email: String,
    pub keys: Vec<ApiKeyRow>,
    pub more_keys: bool,
    /// The tenant's failure preset (`""`: the server's), and the choices offered.
    pub preset: String,
    pub presets: Vec<PresetChoice>,
    pub retention: RetentionView,
    pub portal: PortalView,
    /// The tenant's operational-webhook endpoints, and the form that adds one (as typed, with
    /// its problems, when refused).
    pub operational: Vec<OperationalRow>,
    pub ops_form: OperationalForm,
    pub ops_problems: crate::problems::Problems,
    /// Every operational event type, for the form's checkboxes.
    pub ops_types: &'static [&'static str],
    /// Who gets early-warning emails: the choice (`notification`, `other`, `nobody`) and the
    /// other address, stored or as typed, with the form's problems when refused.
    pub warn: WarningView,
    pub notice: Option<String>,
    /// A key just created: its only showing.
    pub new_key: Option<String>,
    pub error: Option<String>,
}

/// The early-warning recipient form, stored or as typed.
#[derive(Default)]
pub struct WarningView {
    pub choice: String,
    pub address: String,
    pub problems: crate::problems::Problems,
    /// `endpoint_warn_after` and `endpoint_disable_after`, for the form's text.
    pub after: String,
    pub disable_after: String,
}

/// The tenant's portal settings as stored or as typed.
pub struct PortalView {
    pub display_name: String,
    pub logo_url: String,
    pub color: String,
    pub dark: bool,
    /// One origin per line.
    pub allowed_origins: String,
    pub public_endpoints_only: bool,
    pub hide_advanced: bool,
    /// Says how the chosen colour is shown when it had to change to stay readable.
    pub accent_note: Option<String>,
}

impl PortalView {
    pub fn of(s: &domain::portal::PortalSettings) -> Self {
        PortalView {
            display_name: s.display_name.clone().unwrap_or_default(),
            logo_url: s.logo_url.clone().unwrap_or_default(),
            color: s.color.clone().unwrap_or_default(),
            dark: s.dark,
            allowed_origins: s.allowed_origins.join("\n"),
            public_endpoints_only: s.public_endpoints_only,
            hide_advanced: s.hide_advanced,
            accent_note: s.color.as_ref().and_then(|chosen| {
                let shown = s.accent().color;
                let theme = if s.dark { "dark" } else { "light" };
                (shown != *chosen).then(|| {
                    format!(
                        "{chosen} is too faint for text on the {theme} theme (WCAG AA asks for \
                         {}:1), so the portal shows it as {shown}.",
                        domain::portal::MIN_CONTRAST
                    )
                })
            }),
        }
    }
}

/// The tenant's retention: its choices as typed or stored (`""`: the server's) and what is
/// in force.
pub struct RetentionView {
    pub payload_days: String,
    pub metadata_days: String,
    pub payload_in_force: String,
    pub metadata_in_force: String,
    pub server_payload: String,
    pub server_metadata: String,
    pub max_days: u32,
}

/// One choice of how failed attempts are classified: its form value and what it means.
pub struct PresetChoice {
    pub value: &'static str,
    pub label: String,
}

impl PresetChoice {
    /// The server's choice (named), then every preset.
    pub fn all(server: StatusPreset) -> Vec<PresetChoice> {
        let meaning = |p: StatusPreset| match p {
            StatusPreset::Default => {
                "hookd's table: 400, 401, 403, 410, 413, 415 and 422 end the retries at once"
            }
            StatusPreset::RetryAllBut410 => {
                "Svix's rule: every failure is retried on the schedule except 410 Gone"
            }
        };
        let mut all = vec![PresetChoice {
            value: "",
            label: format!("The server's choice (now “{server}”: {})", meaning(server)),
        }];
        all.extend(StatusPreset::ALL.map(|p| PresetChoice {
            value: p.as_str(),
            label: format!("“{p}”: {}", meaning(p)),
        }));
        all
    }
}

/// An operational-webhook endpoint as the Settings page lists it.
pub struct OperationalRow {
    pub id: String,
    pub url: String,
    pub description: String,
    /// The event types it gets, for people ("every event" when it filters none).
    pub types: String,
    pub disabled_reason: Option<String>,
    /// What receivers verify its events with.
    pub secret: String,
}

/// The form that adds an operational-webhook endpoint, as typed.
#[derive(Clone, Debug, Default)]
pub struct OperationalForm {
    pub url: String,
    pub description: String,
    pub types: Vec<String>,
}

impl OperationalForm {
    pub fn has(&self, t: &&str) -> bool {
        self.types.iter().any(|x| x == t)
    }
}

pub struct ApiKeyRow {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub created: When,
    pub last_used: Option<When>,
    pub revoked: Option<When>,
}

/// The endpoint form (new and edit), with the values as typed and every problem found.
#[derive(Template)]
#[template(path = "endpoint_form.html")]
pub struct EndpointFormPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    /// `None` for a new endpoint.
    pub ep_id: Option<String>,
    pub form: EndpointFormValues,
    pub errors: crate::problems::Problems,
    /// The event-type picker: the live event types (the first [`PICKER_TYPES`] by name) and
    /// the endpoint's own choices, archived ones included.
    pub picker: Vec<PickerItem>,
    /// More live event types exist than the picker lists.
    pub more_event_types: bool,
    /// Whether the form has its "Advanced" part (timeout, rate limit, concurrency, retry
    /// policy, headers), and whether it starts open.
    pub advanced: bool,
    pub advanced_open: bool,
}

/// Most live event types the endpoint form's picker lists.
pub const PICKER_TYPES: u64 = store::MAX_LIMIT;

/// One checkbox of the event-type picker.
#[derive(Clone, Debug)]
pub struct PickerItem {
    pub name: String,
    pub description: String,
    pub checked: bool,
    /// Archived (or gone) since the endpoint chose it: shown so it can be kept or dropped,
    /// never offered to a new choice.
    pub retired: bool,
}

/// The endpoint form's fields, as text.
#[derive(Clone, Debug, Default)]
pub struct EndpointFormValues {
    pub csrf: String,
    pub url: String,
    pub description: String,
    /// The picker's choice: `all` (every event type), `some` (the checked ones), or empty
    /// (a client without the picker: the checked ones, if any, else all).
    pub filter: String,
    /// The checked event types (each value may also be a comma-separated list).
    pub event_types: Vec<String>,
    pub channels: String,
    /// Like `15s`; empty means the default.
    pub timeout: String,
    pub max_concurrency: String,
    pub throttle_rate: String,
    /// The JSON of the API's `retryPolicy`; empty means the default.
    pub retry_policy: String,
    /// Custom headers sent with every attempt, one `Name: value` per line.
    pub headers: String,
    /// The "Send trace context" box is checked.
    pub send_traceparent: bool,
    /// The form had that box (the dashboard's, not the portal's): unchecked then means off,
    /// and without it the stored choice stays.
    pub traceparent_shown: bool,
}

impl EndpointFormValues {
    /// The posted form (`web::Form<Vec<(String, String)>>`: checkboxes repeat their name).
    /// Unknown fields are ignored, as a form's would be; a repeated text field keeps its last.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> EndpointFormValues {
        let mut f = EndpointFormValues::default();
        for (k, v) in pairs {
            let slot = match k.as_str() {
                "event_types" => {
                    f.event_types.push(v);
                    continue;
                }
                "send_traceparent" => {
                    f.send_traceparent = true;
                    continue;
                }
                "traceparent_shown" => {
                    f.traceparent_shown = true;
                    continue;
                }
                "csrf" => &mut f.csrf,
                "url" => &mut f.url,
                "description" => &mut f.description,
                "filter" => &mut f.filter,
                "channels" => &mut f.channels,
                "timeout" => &mut f.timeout,
                "max_concurrency" => &mut f.max_concurrency,
                "throttle_rate" => &mut f.throttle_rate,
                "retry_policy" => &mut f.retry_policy,
                "headers" => &mut f.headers,
                _ => continue,
            };
            *slot = v;
        }
        f
    }

    /// The checked event types, each once, in the order given.
    pub fn chosen_types(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for name in self
            .event_types
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
        out
    }

    /// Whether the form asks for every event type (no filter).
    pub fn all_types(&self) -> bool {
        match self.filter.as_str() {
            "all" => true,
            "some" => false,
            _ => self.chosen_types().is_empty(),
        }
    }
}

/// The endpoint page's live part: badge, facts, deliveries by state and recent attempts, read
/// in one request. The page shows each in its place; polled alone, the answer is the attempts
/// card with the badge, facts and counts swapped in beside it (`hx-swap-oob`), so what they
/// say never disagrees.
#[derive(Template)]
#[template(path = "endpoint_live.html")]
pub struct EndpointLive {
    pub root: &'static str,
    pub app_id: String,
    pub ep_id: String,
    pub ep: EndpointView,
    /// Deliveries by state (label, count, class), as the stats API gives them.
    pub states: Vec<(&'static str, String, &'static str)>,
    pub attempts: Vec<AttemptRow>,
    pub more_attempts: bool,
}

/// Attempts as charts over a chosen range, on the overview (tenant) or an endpoint's page.
#[derive(Template)]
#[template(path = "charts.html")]
pub struct ChartsFragment {
    pub charts: Vec<crate::charts::Chart>,
    pub range: crate::charts::ChartRange,
    /// The range switch, one link per range.
    pub ranges: Vec<ChartRangeLink>,
    pub poll_url: String,
}

/// One choice of the charts' range: the page's address with it (kept on reload) and the
/// chart card's, which htmx swaps in.
pub struct ChartRangeLink {
    pub short: &'static str,
    pub label: &'static str,
    pub page: String,
    pub fragment: String,
    pub current: bool,
}

/// The overview's applications, endpoints and badges, served alone for polling.
#[derive(Template)]
#[template(path = "overview_apps.html")]
pub struct OverviewApps {
    /// The session's token for the application buttons' forms (as in [`Overview`]).
    pub csrf: Option<String>,
    pub apps: Vec<AppView>,
    pub more_apps: bool,
    pub attention: usize,
    pub base_url: String,
}

/// The portal's landing page: its script opens the session from the link's fragment.
#[derive(Template)]
#[template(path = "portal_landing.html")]
pub struct PortalLanding {
    pub csrf: Option<String>,
    pub root: &'static str,
    /// The open portal session's application page, if there is one.
    pub home: Option<String>,
}

/// Asks before a portal link replaces an open portal session of another application.
#[derive(Template)]
#[template(path = "portal_switch.html")]
pub struct PortalSwitch {
    pub csrf: Option<String>,
    pub root: &'static str,
    /// "Acme (Customer Co)": the open session's tenant and application.
    pub open_name: String,
    pub open_app: String,
    /// The same of the link being opened.
    pub new_name: String,
    pub token: String,
    /// The open session's CSRF token.
    pub confirm: String,
}

/// The portal's home: one application's endpoints and the tenant's event types.
#[derive(Template)]
#[template(path = "portal_home.html")]
pub struct PortalHome {
    pub csrf: Option<String>,
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    pub read_only: bool,
    pub can: Can,
    pub endpoints: Vec<EndpointRow>,
    pub more_endpoints: bool,
    pub event_types: Vec<EventTypeRow>,
}

/// An event type in the portal's catalogue.
pub struct EventTypeRow {
    pub name: String,
    pub description: String,
    pub deprecated: bool,
    /// The first example (see `event_type::Model::example`), pretty-printed.
    pub example: Option<String>,
}

impl EventTypeRow {
    pub fn of(et: &store::entities::event_type::Model) -> Self {
        let example = et
            .example(0)
            .ok()
            .flatten()
            .and_then(|ex| serde_json::to_string_pretty(&ex).ok());
        EventTypeRow {
            name: et.name.clone(),
            description: et.description.clone(),
            deprecated: et.deprecated,
            example,
        }
    }
}

/// An endpoint's current signing secret, shown on request.
#[derive(Template)]
#[template(path = "secret.html")]
pub struct SecretFragment {
    pub secret: String,
}

/// An endpoint's badge: CSS class and label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub class: &'static str,
    pub label: &'static str,
}

impl Status {
    pub fn of(ep: &endpoint::Model, now: Timestamp) -> Status {
        let (class, label) = if ep.disabled {
            ("disabled", "Disabled")
        } else if ep.breaker_state == BreakerPhase::Open
            && ep.breaker_until.is_none_or(|u| u > now.as_millis())
        {
            ("open", "Breaker open")
        } else if ep.failing_since.is_some() {
            ("failing", "Failing")
        } else if ep.last_success_at.is_none() {
            // Neither a success nor a failure yet: "Healthy" would claim what nobody saw.
            ("new", "No deliveries yet")
        } else {
            ("healthy", "Healthy")
        };
        Status { class, label }
    }

    pub fn needs_attention(&self) -> bool {
        !matches!(self.class, "healthy" | "new")
    }
}

impl EndpointRow {
    pub fn of(ep: &endpoint::Model, now: Timestamp) -> Self {
        EndpointRow {
            id: ep.id.to_string(),
            app_id: ep.app_id.to_string(),
            url: ep.url.clone(),
            description: ep.description.clone(),
            status: Status::of(ep, now),
        }
    }
}

impl EndpointView {
    pub fn of(ep: &endpoint::Model, now: Timestamp, breaker: &BreakerConfig) -> Self {
        let status = Status::of(ep, now);
        EndpointView {
            id: ep.id.to_string(),
            url: ep.url.clone(),
            description: ep.description.clone(),
            status,
            disabled: ep.disabled,
            disabled_reason: ep.disabled_reason.clone().filter(|r| !r.is_empty()),
            disabled_at: ep.disabled_at.map(When::at_ms),
            failing_since: ep.failing_since.map(When::at_ms),
            last_success_at: ep.last_success_at.map(When::at_ms),
            paused: match (status.class, ep.breaker_until) {
                ("open", Some(until)) => Some(domain::breaker::paused_words(
                    breaker,
                    Timestamp::from_millis(until),
                    now,
                    &show_time(until),
                )),
                _ => None,
            },
            // A stored list that cannot be read shows as every event type, as delivery reads it.
            event_types: ep.filter_types().ok().flatten(),
        }
    }
}

impl AttemptRow {
    pub fn of(a: &attempt::Model) -> Self {
        AttemptRow {
            id: a.id.to_string(),
            when: When::at_ms(a.started_at),
            msg_id: a.msg_id.to_string(),
            number: a.attempt_number,
            trigger: a.trigger.to_string(),
            outcome: match (a.status_code, a.error_kind) {
                (Some(code), _) => code.to_string(),
                (None, Some(kind)) => kind.to_string(),
                (None, None) => "—".to_owned(),
            },
            ok: a.classification == domain::classify::Verdict::Success,
            classification: a.classification.to_string(),
            duration_ms: a.duration_ms,
            detail: a
                .error_detail
                .clone()
                .or_else(|| a.response_excerpt.clone())
                .map(|d| excerpt(&d, 120))
                .unwrap_or_default(),
        }
    }
}

/// A delivery state's badge class.
pub fn state_class(state: DeliveryState) -> &'static str {
    match state {
        DeliveryState::Succeeded => "healthy",
        DeliveryState::Failed => "failing",
        DeliveryState::Pending | DeliveryState::Sending => "open",
        DeliveryState::Skipped | DeliveryState::Paused => "disabled",
    }
}

/// The most of a payload a page shows, and the most its re-indented form may take: a page
/// stays small whatever was sent (a 1 MiB payload indented per level rendered a 128 MB page).
pub const PAYLOAD_SHOWN_BYTES: usize = 64 * 1024;
const PRETTY_MAX_BYTES: usize = 4 * PAYLOAD_SHOWN_BYTES;

/// A payload as a page shows it: re-indented when it is small and shallow enough, otherwise
/// the raw text, cut at [`PAYLOAD_SHOWN_BYTES`] (the whole is a download away).
pub struct PayloadView {
    pub text: String,
    /// Set when `text` is only the start: the payload's full size in bytes.
    pub cut_from: Option<usize>,
}

pub fn payload_view(bytes: &[u8]) -> PayloadView {
    if bytes.is_empty() {
        return PayloadView {
            text: "(content expunged: the payload was deleted and cannot be sent again)".into(),
            cut_from: None,
        };
    }
    if bytes.len() <= PAYLOAD_SHOWN_BYTES
        && domain::payload::depth_within(bytes, domain::payload::MAX_DEPTH)
        && let Some(text) = pretty_payload(bytes, PRETTY_MAX_BYTES)
    {
        return PayloadView {
            text,
            cut_from: None,
        };
    }
    if bytes.len() <= PAYLOAD_SHOWN_BYTES {
        return PayloadView {
            text: String::from_utf8_lossy(bytes).into_owned(),
            cut_from: None,
        };
    }
    let mut end = PAYLOAD_SHOWN_BYTES;
    // Cut on a character boundary (a UTF-8 continuation byte is 0b10xxxxxx).
    while end > 0 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    PayloadView {
        text: String::from_utf8_lossy(&bytes[..end]).into_owned(),
        cut_from: Some(bytes.len()),
    }
}

/// The stored payload for reading: JSON re-indented (keys, their order and numbers exactly as
/// sent), anything else as text. `None` when the result would pass `max` bytes.
pub fn pretty_payload(bytes: &[u8], max: usize) -> Option<String> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() {
        return Some(String::from_utf8_lossy(bytes).into_owned());
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    let mut chars = text.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    while let Some(c) = chars.next() {
        if out.len() > max {
            return None;
        }
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if chars.peek().is_some_and(|&n| n == '}' || n == ']') {
                    out.extend(chars.next());
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    (out.len() <= max).then_some(out)
}

/// Percent-encodes a query-string value.
pub fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `2024-05-01 12:00:00 UTC`, for a time inside a sentence; on its own a page shows a
/// [`When`].
pub fn show_time(ms: i64) -> String {
    When::at_ms(ms).utc_text()
}

fn excerpt(s: &str, max_chars: usize) -> String {
    let mut out: String = s.chars().take(max_chars).collect();
    if s.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> endpoint::Model {
        store::testing::endpoint_model("ep_1", "https://example.com/hook")
    }

    #[test]
    fn a_log_row_says_what_happened_at_each_endpoint_and_what_comes_next() {
        let now = Timestamp::from_secs(1_000);
        let mut d = store::testing::delivery_model();
        let cell = |d: &delivery::Model| {
            let c = StatusCell::of(d, None, now);
            (c.label, c.class, c.next)
        };
        assert_eq!(cell(&d), ("Pending", "open", Some(NextTry::Now)));
        // Failed once, retried later: failing, not delivered.
        d.attempt_count = 1;
        d.next_attempt_at = now.as_millis() + 25_000;
        assert_eq!(
            cell(&d),
            (
                "Failing",
                "failing",
                Some(NextTry::At(When::at_ms(1_025_000)))
            )
        );
        // Re-armed by a resend: pending again until its next try fails.
        d.attempts_at_arm = 1;
        assert_eq!(cell(&d).0, "Pending");
        d.state = DeliveryState::Failed;
        assert_eq!(cell(&d), ("Dead", "failing", None));
        d.state = DeliveryState::Succeeded;
        assert_eq!(cell(&d), ("Delivered", "healthy", None));
        d.state = DeliveryState::Paused;
        assert_eq!(cell(&d), ("Paused", "disabled", None));
    }

    #[test]
    fn badges_rank_disabled_then_breaker_then_failing() {
        let now = Timestamp::from_secs(1_000);
        let mut ep = endpoint();
        assert_eq!(Status::of(&ep, now).label, "No deliveries yet");
        assert!(!Status::of(&ep, now).needs_attention());
        ep.last_success_at = Some(1);
        assert_eq!(Status::of(&ep, now).label, "Healthy");
        ep.failing_since = Some(1);
        assert_eq!(Status::of(&ep, now).label, "Failing");
        ep.breaker_state = BreakerPhase::Open;
        ep.breaker_until = Some(now.as_millis() + 1);
        assert_eq!(Status::of(&ep, now).label, "Breaker open");
        let paused = EndpointView::of(&ep, now, &BreakerConfig::default()).paused;
        assert!(
            paused
                .as_deref()
                .is_some_and(|p| p.starts_with("Paused for 30 s after 5 failures in a row")),
            "{paused:?}"
        );
        // An open breaker whose time is up is only failing until the next try says more.
        ep.breaker_until = Some(now.as_millis() - 1);
        assert_eq!(Status::of(&ep, now).label, "Failing");
        ep.disabled = true;
        assert_eq!(Status::of(&ep, now).label, "Disabled");
        assert!(Status::of(&ep, now).needs_attention());
    }

    #[test]
    fn payloads_are_indented_without_reordering_or_rounding() {
        let raw = br#"{"z":1,"a":{"b":[1, 2,{}],"e":[]},"s":"x, {y}: \"q\"","n":12345678901234567890123}"#;
        let pretty = pretty_payload(raw, 10_000).unwrap();
        assert_eq!(
            pretty,
            "{\n  \"z\": 1,\n  \"a\": {\n    \"b\": [\n      1,\n      2,\n      {}\n    ],\n    \"e\": []\n  },\n  \"s\": \"x, {y}: \\\"q\\\"\",\n  \"n\": 12345678901234567890123\n}"
        );
        let a: serde_json::Value = serde_json::from_slice(raw).unwrap();
        let b: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            pretty_payload(b"not json <b>", 100).unwrap(),
            "not json <b>"
        );
        assert_eq!(pretty_payload(b" 42 ", 100).unwrap(), "42");
        assert_eq!(pretty_payload(raw, 20), None, "over the limit");
    }

    #[test]
    fn a_page_shows_at_most_64_kib_of_a_payload() {
        // 1 MiB, shallow: raw and cut, the full size named.
        let big = format!("{{\"a\":\"{}\"}}", "é".repeat(512 * 1024));
        let v = payload_view(big.as_bytes());
        assert_eq!(v.cut_from, Some(big.len()));
        assert!(v.text.len() <= PAYLOAD_SHOWN_BYTES && v.text.len() > PAYLOAD_SHOWN_BYTES - 4);
        // Small but deeply nested (stored before the API limited depth): raw, not indented.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(5000), "]".repeat(5000));
        let v = payload_view(deep.as_bytes());
        assert_eq!((v.text.len(), v.cut_from), (deep.len(), None));
        // Small and wide at the depth limit: indentation would pass 256 KiB, so raw.
        let wide = format!(
            "{}{}{}",
            "[".repeat(64),
            vec!["1"; 30_000].join(","),
            "]".repeat(64)
        );
        let v = payload_view(wide.as_bytes());
        assert_eq!(v.text, wide);
        // The ordinary case: re-indented.
        assert_eq!(payload_view(br#"{"a":1}"#).text, "{\n  \"a\": 1\n}");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("user.created"), "user.created");
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn times_show_in_utc() {
        assert_eq!(show_time(1_614_265_330_123), "2021-02-25 15:02:10 UTC");
    }
}
