use domain::ids::TenantId;
use store::entities::{application, endpoint};
use store::{NewApplication, NewAttempt, NewEndpoint, NewTenant, Store};

pub use store::testing::each_backend;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub async fn tenant(store: &Store, name: &str) -> TenantId {
    let t = store
        .create_tenant(NewTenant {
            name: name.into(),
            notification_email: format!("{name}@example.com"),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await
        .unwrap();
    t.id
}

pub async fn app(store: &Store, tenant: TenantId, name: &str) -> application::Model {
    store
        .create_application(
            tenant,
            NewApplication {
                name: name.into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

pub async fn endpoint(
    store: &Store,
    tenant: TenantId,
    app: &application::Model,
    new: NewEndpoint,
) -> endpoint::Model {
    store
        .create_endpoint(tenant, app, new, SECRET)
        .await
        .unwrap()
}

pub fn url(path: &str) -> NewEndpoint {
    NewEndpoint {
        url: format!("https://example.com/{path}"),
        ..Default::default()
    }
}

/// A first scheduled try at `url` answered with `status` in 12 ms: a success for a 2xx, else
/// one to retry.
pub fn first_try(url: &str, status: u16) -> NewAttempt {
    use domain::classify::Verdict;
    NewAttempt {
        attempt_number: 1,
        trigger: domain::delivery::AttemptTrigger::Scheduled,
        url: url.to_owned(),
        started_at: domain::Timestamp::now(),
        duration_ms: 12,
        status_code: Some(status),
        response_excerpt: None,
        error_kind: None,
        error_detail: None,
        classification: if (200..300).contains(&status) {
            Verdict::Success
        } else {
            Verdict::Retry
        },
        retry_after_ms: None,
    }
}

/// How many steps `Migrator::down` takes to undo `first` and every migration after it, so a
/// test that undoes one migration names it rather than counting the ones added since.
pub fn steps_to_undo(first: &str) -> u32 {
    use migration::MigratorTrait;
    let all = migration::Migrator::migrations();
    let at = all
        .iter()
        .position(|m| m.name() == first)
        .unwrap_or_else(|| panic!("no migration {first}"));
    (all.len() - at) as u32
}
