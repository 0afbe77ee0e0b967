//! Every index on the hot tables is read by a query of hookd's, and no hot query scans a whole
//! table: the plans of the real statements (built by the functions the store runs), on SQLite
//! and PostgreSQL (m0007, decisions 50). `scripts/index-plans` prints them, and more, on a
//! filled database of each kind (docs/index-plans.md).

#[cfg(test)]
mod tests {
    use domain::Timestamp;
    use domain::delivery::DeliveryState;
    use domain::ids::{ApplicationId, EndpointId, MessageId, TenantId};
    use sea_orm::{
        ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait, Statement,
        TransactionTrait,
    };

    use crate::page::page_query;
    use crate::testing::TestDb;
    use crate::traffic::{
        attempts_of_endpoint, attempts_of_message, explain, message_listing, message_lookup,
    };
    use crate::{AttemptFilter, ListParams, MessageFilter};

    /// The ids and time a statement list is built with: random ones for empty tables, or a
    /// tenant's application, endpoint and message of a filled database.
    #[derive(Clone, Copy)]
    struct Ids {
        t: TenantId,
        a: ApplicationId,
        e: EndpointId,
        m: MessageId,
        now: Timestamp,
    }

    impl Ids {
        fn random() -> Ids {
            Ids {
                t: TenantId::new(),
                a: ApplicationId::new(),
                e: EndpointId::new(),
                m: MessageId::new(),
                now: Timestamp::now(),
            }
        }
    }

    /// (what runs it, the statement, the indexes its plan must name).
    fn hot_statements(
        backend: sea_orm::DbBackend,
        ids: Ids,
    ) -> Vec<(&'static str, Statement, Vec<&'static str>)> {
        let Ids { t, a, e, m, .. } = ids;
        let now = ids.now.as_millis();
        let skip = [EndpointId::new(), EndpointId::new()];
        let dialect = crate::dialect_of(crate::Backend::of_db(backend));
        let claim = |fresh: bool| {
            let now = ids.now;
            crate::claims::claim_statement(
                dialect,
                "owner",
                now,
                now.plus(std::time::Duration::from_secs(30)),
                100,
                fresh.then(|| crate::Fresh {
                    since: Timestamp::from_millis(now.as_millis() - 5_000),
                    skip: &skip,
                }),
            )
        };
        // A message's key: `(app_id, id)` on PostgreSQL since m0037, the id on SQLite.
        let message_key = match backend {
            sea_orm::DbBackend::Postgres => "idx_messages_app",
            _ => "sqlite_autoindex_messages_1",
        };
        let deep = ListParams {
            limit: 50,
            iterator: Some(m.to_string()),
            ascending: false,
            walk_window: 0,
        };
        let by_type = MessageFilter {
            event_types: vec!["invoice.paid".to_owned()],
            ..MessageFilter::default()
        };
        let of_endpoint = MessageFilter {
            endpoint: Some(e),
            ..MessageFilter::default()
        };
        vec![
            (
                "dispatcher: claim new deliveries",
                claim(true),
                vec!["idx_deliveries_new", "uq_deliveries_key_seq"],
            ),
            (
                "dispatcher: claim due deliveries",
                claim(false),
                vec!["idx_deliveries_due", "uq_deliveries_key_seq"],
            ),
            (
                "dispatcher: next due time",
                Statement::from_string(backend, crate::claims::NEXT_DUE_SQL),
                vec!["idx_deliveries_due"],
            ),
            (
                "scheduler: expired leases",
                crate::claims::expired_leases(ids.now).build(backend),
                vec!["idx_deliveries_leased"],
            ),
            (
                "/metrics: queue gauges",
                Statement::from_string(backend, crate::stats::gauges_sql(now)),
                vec![
                    "idx_deliveries_due",
                    "idx_deliveries_leased",
                    "idx_deliveries_held",
                ],
            ),
            (
                "API: list messages, a deep page",
                page_query(
                    message_listing(t, a, &MessageFilter::default()),
                    crate::entities::message::Column::Id,
                    &deep,
                )
                .build(backend),
                vec!["idx_messages_app"],
            ),
            (
                "API: list messages of an event type",
                page_query(
                    message_listing(t, a, &by_type),
                    crate::entities::message::Column::Id,
                    &deep,
                )
                .build(backend),
                vec!["idx_messages_app"],
            ),
            (
                "API: a message by eventId",
                message_lookup(t, a, "order-1234").build(backend),
                vec!["uq_messages_app_event"],
            ),
            (
                "API: a message's attempts",
                AttemptFilter::default()
                    .apply(t, a, attempts_of_message(t, m))
                    .build(backend),
                vec!["idx_attempts_msg"],
            ),
            (
                "API: an endpoint's attempts",
                AttemptFilter::default()
                    .apply(t, a, attempts_of_endpoint(t, e))
                    .build(backend),
                vec!["idx_attempts_endpoint"],
            ),
            (
                "dashboard: an endpoint's dead letters",
                crate::recovery::endpoint_deliveries(t, e, DeliveryState::Failed).build(backend),
                vec!["idx_deliveries_held"],
            ),
            (
                "API: an endpoint's messages, a deep page (a delivery that succeeded is not kept)",
                page_query(
                    message_listing(t, a, &of_endpoint),
                    crate::entities::message::Column::Id,
                    &deep,
                )
                .build(backend),
                vec![
                    "idx_messages_app",
                    "uq_deliveries_msg_endpoint",
                    "idx_attempts_msg",
                ],
            ),
            (
                "statistics: an application's message destinations, per endpoint",
                crate::usage::deliveries_per_endpoint(
                    t,
                    [e],
                    Timestamp::from_millis(now - 86_400_000),
                    ids.now,
                )
                .build(backend),
                vec!["idx_deliveries_of_endpoint"],
            ),
            (
                "API: an endpoint's statistics, its successes",
                backend.build(&crate::outcomes::successes_query(
                    t,
                    &[e],
                    Some(Timestamp::from_millis(now - 86_400_000)),
                    None,
                )),
                vec!["idx_attempts_endpoint", "uq_deliveries_msg_endpoint"],
            ),
            (
                "replay: the messages never delivered to an endpoint",
                crate::recovery::never_delivered(
                    t,
                    &crate::entities::endpoint::Model {
                        id: e,
                        tenant_id: t,
                        app_id: a,
                        ..crate::testing::endpoint_model("ep_1", "https://example.com/")
                    },
                    MessageId::lower_bound(ids.now),
                    Some(m),
                    None,
                )
                .build(backend),
                vec![
                    "idx_messages_app",
                    "uq_deliveries_msg_endpoint",
                    "idx_attempts_msg",
                ],
            ),
            (
                "breaker: defer an endpoint's due backlog",
                dialect.statement(
                    dialect.defer_backlog,
                    vec![ids.now.as_millis().into(), e.into()],
                ),
                vec!["idx_deliveries_due"],
            ),
            (
                "gate: pause an endpoint's deliveries",
                crate::gate::pause_or_resume_update(dialect, e, true, now).build(backend),
                vec!["idx_deliveries_due", "idx_deliveries_leased"],
            ),
            (
                "gate: resume an endpoint's deliveries",
                crate::gate::pause_or_resume_update(dialect, e, false, now).build(backend),
                vec!["idx_deliveries_held"],
            ),
            (
                "dispatcher: a claimed batch's messages",
                crate::dispatch::claimed_messages(dialect, &[(a, m), (ApplicationId::new(), m)])
                    .build(backend),
                vec!["idx_messages_app"],
            ),
            (
                "retention: delete a batch's messages",
                crate::entities::message::Entity::delete_many()
                    .filter(dialect.messages_of(a, &[m, MessageId::new()]))
                    .build(backend),
                vec!["idx_messages_app"],
            ),
            (
                "API: an endpoint's attempts of a channel's messages",
                AttemptFilter {
                    messages: MessageFilter {
                        channel: Some("ch-1".into()),
                        ..MessageFilter::default()
                    },
                    ..AttemptFilter::default()
                }
                .apply(t, a, attempts_of_endpoint(t, e))
                .build(backend),
                vec!["idx_attempts_endpoint", "idx_messages_app"],
            ),
            (
                "recover: an endpoint's failed deliveries since a time",
                crate::recovery::recoverable(t, e, Timestamp::from_millis(now - 3_600_000), None)
                    .order_by_asc(crate::entities::delivery::Column::Id)
                    .limit(100)
                    .build(backend),
                vec!["idx_deliveries_held", message_key],
            ),
            (
                "retention: the next batch of an application's messages",
                crate::retention::walk_batch(
                    t,
                    a,
                    MessageId::lower_bound(ids.now),
                    crate::retention::Bound::After(m),
                )
                .build(backend),
                vec!["idx_messages_app"],
            ),
        ]
    }

    /// A whole-table scan of a hot table in either database's plan output.
    fn full_scan(plan: &str) -> Option<&str> {
        plan.lines().find(|l| {
            let l = l.trim();
            ["messages", "deliveries", "attempts"].iter().any(|t| {
                l.contains(&format!("Seq Scan on {t}"))
                    || l.ends_with(&format!("SCAN {t}"))
                    || l.contains(&format!("SCAN {t} "))
                        && !l.contains("USING INDEX")
                        && !l.contains("USING COVERING INDEX")
                        && !l.contains("USING INTEGER PRIMARY KEY")
            })
        })
    }

    /// PostgreSQL: each index of the hot tables with its first column, but partial ones (whose
    /// predicate bounds a read of them whole).
    async fn leading_columns(conn: &impl ConnectionTrait) -> Vec<(String, String)> {
        let sql = "SELECT i.relname AS index, a.attname AS leading FROM pg_index x \
             JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid \
             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] \
             WHERE t.relname IN ('messages', 'deliveries', 'attempts') AND x.indpred IS NULL";
        conn.query_all(Statement::from_string(conn.get_database_backend(), sql))
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.try_get::<String>("", "index").unwrap(),
                    r.try_get::<String>("", "leading").unwrap(),
                )
            })
            .collect()
    }

    /// A PostgreSQL index scan whose condition does not name the index's first column: a
    /// read of the whole index, which a plan shows as an index scan, not a table scan (a
    /// message looked up by its id alone once messages are keyed by `(app_id, id)`, m0037).
    fn whole_index<'p>(plan: &'p str, leading: &[(String, String)]) -> Option<&'p str> {
        let lines: Vec<&str> = plan.lines().collect();
        lines.iter().enumerate().find_map(|(n, line)| {
            let (index, column) = leading
                .iter()
                .find(|(i, _)| line.contains(&format!(" using {i} on ")))?;
            let cond = lines[n + 1..]
                .iter()
                .take_while(|l| !l.contains("->"))
                .find(|l| l.trim_start().starts_with("Index Cond:"));
            let names_it = cond.is_some_and(|c| {
                c.split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                    .any(|w| w == column)
            });
            (!names_it).then_some(*line).filter(|_| !index.is_empty())
        })
    }

    #[tokio::test]
    async fn every_hot_query_reads_its_index_and_no_hot_table_is_scanned_whole() {
        for db in TestDb::all().await {
            let conn = db.store.connection();
            let backend = conn.get_database_backend();
            let mut used = std::collections::BTreeSet::new();
            let leading = match backend {
                sea_orm::DbBackend::Postgres => leading_columns(conn).await,
                _ => Vec::new(),
            };
            for (name, stmt, indexes) in hot_statements(backend, Ids::random()) {
                // PostgreSQL would rightly scan these empty tables; with sequential scans
                // priced out it shows the plan a large table gets.
                let txn = conn.begin().await.unwrap();
                // SQLite: EXPLAIN alone never checks that this pooled connection's copy of the
                // schema is current (one opened before the migrations would show old indexes);
                // a read does.
                let first = match backend {
                    sea_orm::DbBackend::Postgres => "SET LOCAL enable_seqscan = off",
                    _ => "SELECT COUNT(*) FROM sqlite_master",
                };
                txn.execute_unprepared(first).await.unwrap();
                let plan = explain(&txn, stmt).await.unwrap();
                txn.rollback().await.unwrap();
                // SQLite's choice follows from the schema alone. PostgreSQL's, on these empty
                // tables, ties between indexes that would serve equally (both pending-only
                // indexes for MIN(next_attempt_at)): there the plan must read an index of the
                // table, and none may be scanned whole.
                for index in indexes {
                    let read = match backend {
                        sea_orm::DbBackend::Postgres => plan.contains("Index"),
                        _ => plan.contains(index),
                    };
                    assert!(
                        read,
                        "{}: {name} does not read {index}:\n{plan}",
                        db.backend_name
                    );
                    used.insert(index);
                }
                assert_eq!(
                    full_scan(&plan),
                    None,
                    "{}: {name} scans a whole table:\n{plan}",
                    db.backend_name
                );
                assert_eq!(
                    whole_index(&plan, &leading),
                    None,
                    "{}: {name} reads an index whole:\n{plan}",
                    db.backend_name
                );
            }
            // Every secondary index of the hot tables is one a query above reads, but the
            // unique ones that only enforce a rule.
            let indexes = index_names(&db).await;
            let unread: Vec<&String> = indexes
                .iter()
                .filter(|i| {
                    !used.contains(i.as_str()) && i.as_str() != "uq_deliveries_msg_endpoint"
                })
                .collect();
            assert!(
                unread.is_empty(),
                "{}: indexes no hot query reads: {unread:?}",
                db.backend_name
            );
        }
    }

    /// The named secondary indexes of messages, deliveries and attempts.
    async fn index_names(db: &TestDb) -> Vec<String> {
        let conn = db.store.connection();
        let sql = match conn.get_database_backend() {
            sea_orm::DbBackend::Postgres => {
                "SELECT indexname AS name FROM pg_indexes \
                 WHERE tablename IN ('messages', 'deliveries', 'attempts') \
                   AND indexname NOT LIKE '%_pkey' ORDER BY 1"
            }
            _ => {
                "SELECT name FROM sqlite_master WHERE type = 'index' \
                 AND tbl_name IN ('messages', 'deliveries', 'attempts') \
                 AND name NOT LIKE 'sqlite_autoindex_%' ORDER BY 1"
            }
        };
        conn.query_all(Statement::from_string(conn.get_database_backend(), sql))
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get::<String>("", "name").unwrap())
            .collect()
    }

    /// Statements of the hot tables beyond [`hot_statements`], built as the store builds them,
    /// whose plans `scripts/index-plans` shows too: (what runs it, the statement).
    fn more_statements(backend: sea_orm::DbBackend, ids: Ids) -> Vec<(&'static str, Statement)> {
        use crate::entities::{Owned, attempt, delivery, message};
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
        let Ids { t, a, e, m, now } = ids;
        // As `delete_application` builds them, for one chunk of its endpoints.
        let app_delete = crate::resources::traffic_of_endpoints(&[e]);
        let first = ListParams {
            limit: 50,
            iterator: None,
            ascending: false,
            walk_window: 0,
        };
        let hour = std::time::Duration::from_secs(3600);
        let list = |filter: MessageFilter| {
            page_query(message_listing(t, a, &filter), message::Column::Id, &first).build(backend)
        };
        // As `Retention::remove` and `delete_endpoint` / `delete_application` build them.
        let batch = [m];
        vec![
            (
                "retention: the first batch of an application's messages",
                crate::retention::walk_batch(
                    t,
                    a,
                    MessageId::lower_bound(Timestamp::from_millis(
                        now.as_millis() - 3 * hour.as_millis() as i64,
                    )),
                    crate::retention::Bound::Start,
                )
                .build(backend),
            ),
            (
                "API: list messages, first page",
                list(MessageFilter::default()),
            ),
            (
                "API: list messages of a channel",
                list(MessageFilter {
                    channel: Some("ch-1".into()),
                    ..MessageFilter::default()
                }),
            ),
            (
                "API: list messages between before and after",
                list(MessageFilter {
                    before: Some(Timestamp::from_millis(
                        now.as_millis() - hour.as_millis() as i64,
                    )),
                    after: Some(Timestamp::from_millis(
                        now.as_millis() - 3 * hour.as_millis() as i64,
                    )),
                    ..MessageFilter::default()
                }),
            ),
            (
                "API: list messages of an event type after a time",
                list(MessageFilter {
                    event_types: vec!["type.3".into()],
                    after: Some(Timestamp::from_millis(
                        now.as_millis() - 3 * hour.as_millis() as i64,
                    )),
                    ..MessageFilter::default()
                }),
            ),
            (
                "API: a message by id",
                message_lookup(t, a, &m.to_string()).build(backend),
            ),
            (
                "API/dashboard: an endpoint's messages",
                list(MessageFilter {
                    endpoint: Some(e),
                    ..MessageFilter::default()
                }),
            ),
            (
                "dashboard: messages with a failed delivery",
                list(MessageFilter {
                    delivery_state: Some(DeliveryState::Failed),
                    ..MessageFilter::default()
                }),
            ),
            (
                "API: a message's deliveries",
                delivery::Entity::find_in(t)
                    .filter(delivery::Column::MsgId.eq(m))
                    .build(backend),
            ),
            (
                "retention: delete a batch's attempts",
                attempt::Entity::delete_many()
                    .filter(attempt::Column::MsgId.is_in(batch))
                    .build(backend),
            ),
            (
                "retention: delete a batch's deliveries",
                delivery::Entity::delete_many()
                    .filter(delivery::Column::MsgId.is_in(batch))
                    .build(backend),
            ),
            (
                "endpoint delete: its attempts",
                attempt::Entity::delete_many()
                    .filter(attempt::Column::EndpointId.eq(e))
                    .build(backend),
            ),
            (
                "endpoint delete: its deliveries",
                delivery::Entity::delete_many()
                    .filter(delivery::Column::EndpointId.eq(e))
                    .build(backend),
            ),
            (
                "warnings: an endpoint's last errors (as `warnings` builds it)",
                attempt::Entity::find()
                    .filter(attempt::Column::EndpointId.eq(e))
                    .filter(attempt::Column::Classification.ne(domain::classify::Verdict::Success))
                    .order_by_desc(attempt::Column::Id)
                    .limit(5)
                    .build(backend),
            ),
            (
                "API: an attempt of a message (as `attempt` builds it)",
                attempt::Entity::find_in(t)
                    .filter(attempt::Column::MsgId.eq(m))
                    .filter(attempt::Column::Id.eq(domain::ids::AttemptId::new()))
                    .build(backend),
            ),
            (
                "API: an attempt's response expunged (as `expunge_attempt_content` builds it)",
                attempt::Entity::update_many()
                    .col_expr(
                        attempt::Column::ResponseExcerpt,
                        sea_orm::sea_query::Expr::value(Option::<String>::None),
                    )
                    .filter(attempt::Column::MsgId.eq(m))
                    .filter(attempt::Column::Id.eq(domain::ids::AttemptId::new()))
                    .build(backend),
            ),
            (
                "usage: an application's deliveries in a period, per endpoint",
                crate::usage::deliveries_per_endpoint(
                    t,
                    [e],
                    Timestamp::from_millis(now.as_millis() - 86_400_000),
                    now,
                )
                .build(backend),
            ),
            (
                "application delete: its attempts",
                app_delete.0.build(backend),
            ),
            (
                "application delete: its deliveries",
                app_delete.1.build(backend),
            ),
            (
                "application delete: its messages",
                message::Entity::delete_many()
                    .filter(message::Column::AppId.eq(a))
                    .build(backend),
            ),
        ]
    }

    /// An id's bytes minted at `ms`: `new_at` never goes back before an id already minted.
    fn minted(ms: i64, rng: &mut impl rand::Rng) -> [u8; 16] {
        (((ms as u128) << 80) | (rng.random::<u128>() & ((1u128 << 80) - 1))).to_be_bytes()
    }

    /// Fills a database with `per_app` messages in each of 2 applications of 4 tenants, each
    /// message delivered to the application's 4 endpoints (most succeeded, some failed,
    /// pending, sending or paused; a quarter of them ordered), one attempt per delivery tried.
    /// Returns the ids of the second tenant's first application.
    async fn fill(store: &crate::Store, per_app: usize) -> Ids {
        use crate::entities::{attempt, delivery, message};
        use crate::{NewApplication, NewEndpoint, NewTenant};
        use domain::delivery::AttemptTrigger;
        use domain::ids::{AttemptId, DeliveryId};
        use sea_orm::{EntityTrait, IntoActiveModel};
        let conn = store.connection();
        let now = Timestamp::now().as_millis();
        let mut rng = rand::rng();
        let mut picked = None;
        for tn in 0..4 {
            let tenant = store
                .create_tenant(NewTenant {
                    name: format!("tenant-{tn}"),
                    notification_email: format!("t{tn}@example.com"),
                    ingest_rate: None,
                    ingest_burst: None,
                })
                .await
                .unwrap();
            for an in 0..2 {
                let app = store
                    .create_application(
                        tenant.id,
                        NewApplication {
                            name: format!("app-{an}"),
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap();
                let mut endpoints = Vec::new();
                for en in 0..4 {
                    let ep = store
                        .create_endpoint(
                            tenant.id,
                            &app,
                            NewEndpoint {
                                url: format!("https://example.com/{tn}/{an}/{en}"),
                                ..Default::default()
                            },
                            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                        )
                        .await
                        .unwrap();
                    endpoints.push(ep.id);
                }
                let (mut msgs, mut dlvs, mut atts) = (Vec::new(), Vec::new(), Vec::new());
                for i in 0..per_app {
                    // One message every 10 s, the newest now.
                    let created = now - (per_app - i) as i64 * 10_000;
                    let id = MessageId::from_bytes(minted(created, &mut rng));
                    let key = (i % 4 == 0).then(|| format!("key-{}", i % 20));
                    msgs.push(message::Model {
                        id,
                        tenant_id: tenant.id,
                        app_id: app.id,
                        event_type: format!("type.{}", i % 10),
                        event_id: Some(format!("evt-{i}")),
                        payload: vec![b'x'; 100],
                        channels: Some(format!("[\"ch-{}\"]", i % 4)),
                        tags: None,
                        ordering_key: key.clone(),
                        created_at: created,
                        deliver_at: None,
                        trace_parent: None,
                    });
                    for (k, ep) in endpoints.iter().enumerate() {
                        let state = match (i * 4 + k) % 100 {
                            0..90 => DeliveryState::Succeeded,
                            90..94 => DeliveryState::Failed,
                            94..97 => DeliveryState::Pending,
                            97 => DeliveryState::Sending,
                            _ => DeliveryState::Paused,
                        };
                        let did = DeliveryId::from_bytes(minted(created, &mut rng));
                        dlvs.push(delivery::Model {
                            id: did,
                            tenant_id: tenant.id,
                            endpoint_id: *ep,
                            msg_id: id,
                            state,
                            attempt_count: 1,
                            attempts_at_arm: 0,
                            next_trigger: AttemptTrigger::Scheduled,
                            next_attempt_at: created + 60_000,
                            lease_owner: (state == DeliveryState::Sending).then(|| "d1".into()),
                            lease_expires_at: (state == DeliveryState::Sending)
                                .then_some(now + 30_000),
                            give_up_at: created + 86_400_000,
                            ordering_key: key.clone(),
                            seq: key.as_ref().map(|_| (i / 20 + 1) as i64),
                            last_status: Some(200),
                            last_error: None,
                            last_attempt_at: Some(created + 50),
                            created_at: created,
                            updated_at: created + 50,
                        });
                        atts.push(attempt::Model {
                            id: AttemptId::from_bytes(minted(created + 50, &mut rng)),
                            tenant_id: tenant.id,
                            endpoint_id: *ep,
                            msg_id: id,
                            attempt_number: 1,
                            trigger: AttemptTrigger::Scheduled,
                            url: "https://example.com/hook".into(),
                            started_at: created + 10,
                            duration_ms: 40,
                            status_code: Some(200),
                            response_excerpt: None,
                            error_kind: None,
                            error_detail: None,
                            classification: domain::classify::Verdict::Success,
                            retry_after_ms: None,
                            request_headers: None,
                            response_headers: None,
                        });
                    }
                    if tn == 1 && an == 0 && i == per_app / 2 {
                        picked = Some(Ids {
                            t: tenant.id,
                            a: app.id,
                            e: endpoints[1],
                            m: id,
                            now: Timestamp::from_millis(now),
                        });
                    }
                }
                let txn = conn.begin().await.unwrap();
                for c in msgs.chunks(500) {
                    message::Entity::insert_many(c.iter().cloned().map(|m| m.into_active_model()))
                        .exec(&txn)
                        .await
                        .unwrap();
                }
                for c in dlvs.chunks(500) {
                    delivery::Entity::insert_many(c.iter().cloned().map(|m| m.into_active_model()))
                        .exec(&txn)
                        .await
                        .unwrap();
                }
                for c in atts.chunks(500) {
                    attempt::Entity::insert_many(c.iter().cloned().map(|m| m.into_active_model()))
                        .exec(&txn)
                        .await
                        .unwrap();
                }
                txn.commit().await.unwrap();
            }
        }
        picked.unwrap()
    }

    /// A batch of messages (a claimed batch's, a retention batch's) is read by its keys on a
    /// filled table that has no statistics yet (autovacuum off, or not yet run; hookd runs no
    /// ANALYZE): each message a probe of `(app_id, id)`, never the application's whole range.
    /// On PostgreSQL an id alone is not known unique since m0037; written as `app_id = ? AND id
    /// IN (…)` the batch read every message of its application, whatever its size (decisions
    /// 108). Read as a set of key pairs, PostgreSQL probes each, or reads the table once when
    /// it is small beside the batch (16,000 messages against 120 keys here), as it would have
    /// read it for `id IN (…)` before m0037.
    #[tokio::test]
    async fn a_batch_of_messages_is_read_by_its_keys_before_any_statistics() {
        use crate::entities::message;
        use sea_orm::ColumnTrait;
        for db in TestDb::all().await {
            let conn = db.store.connection();
            let backend = conn.get_database_backend();
            if backend == sea_orm::DbBackend::Postgres {
                conn.execute_unprepared("ALTER TABLE messages SET (autovacuum_enabled = false)")
                    .await
                    .unwrap();
            }
            let ids = fill(&db.store, 2000).await;
            let batch: Vec<MessageId> = message::Entity::find()
                .select_only()
                .column(message::Column::Id)
                .filter(message::Column::AppId.eq(ids.a))
                .limit(120)
                .into_tuple()
                .all(conn)
                .await
                .unwrap();
            assert_eq!(batch.len(), 120);
            let keys: Vec<(ApplicationId, MessageId)> = batch.iter().map(|m| (ids.a, *m)).collect();
            let dialect = crate::dialect_of(crate::Backend::of_db(backend));
            for (name, stmt) in [
                (
                    "a claimed batch",
                    crate::dispatch::claimed_messages(dialect, &keys).build(backend),
                ),
                (
                    "a retention batch",
                    message::Entity::delete_many()
                        .filter(dialect.messages_of(ids.a, &batch))
                        .build(backend),
                ),
            ] {
                let plan = explain(conn, stmt).await.unwrap();
                // The application's range read and the ids checked in it: an index condition
                // on the application alone (PostgreSQL), or a search by it alone (SQLite).
                let range = plan.lines().any(|l| {
                    (l.contains("Index Cond: (app_id = ") && !l.contains("AND (id = "))
                        || l.contains("idx_messages_app (app_id=?)")
                });
                assert!(
                    !range,
                    "{}: {name} reads its application's range:\n{plan}",
                    db.backend_name
                );
            }
        }
    }

    /// Every secondary index of the tables that grow with messages is read by the plan of some
    /// statement hookd runs, on a filled database of each backend: an index no plan reads costs
    /// bytes per message for nothing (issue 37), and one a change of query stops reading fails
    /// here. SQLite plans without statistics, as hookd never runs ANALYZE there; PostgreSQL's
    /// after a VACUUM ANALYZE, as autovacuum keeps them. `scripts/index-plans` prints every
    /// plan (`HOOKD_PLANS_MESSAGES` messages per application, 2,000 unless set).
    #[tokio::test]
    async fn every_index_of_the_growing_tables_is_read_by_a_plan() {
        let per_app = std::env::var("HOOKD_PLANS_MESSAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        for db in TestDb::all().await {
            let ids = fill(&db.store, per_app).await;
            let conn = db.store.connection();
            let backend = conn.get_database_backend();
            if backend == sea_orm::DbBackend::Postgres {
                conn.execute_unprepared("VACUUM ANALYZE").await.unwrap();
            }
            println!(
                "=== {} ({per_app} messages per application, 8 applications)",
                db.backend_name
            );
            let mut statements: Vec<(&str, Statement)> = hot_statements(backend, ids)
                .into_iter()
                .map(|(name, stmt, _)| (name, stmt))
                .collect();
            statements.extend(more_statements(backend, ids));
            let mut plans = String::new();
            for (name, stmt) in statements {
                let sql = stmt.sql.clone();
                let plan = explain(conn, stmt).await.unwrap();
                println!("--- {}: {name}\n{sql}\n{plan}\n", db.backend_name);
                plans.push_str(&plan);
                plans.push('\n');
            }
            let mut unread = Vec::new();
            for index in index_names(&db).await {
                // Whole words: idx_x is not read because idx_x_y is.
                let read = plans
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == index);
                println!(
                    "{}: index {index}: {}",
                    db.backend_name,
                    if read { "read" } else { "NOT READ" }
                );
                if !read {
                    unread.push(index);
                }
            }
            assert!(
                unread.is_empty(),
                "{}: no plan reads {unread:?}: drop them, or say which query needs them",
                db.backend_name
            );
        }
    }
}
