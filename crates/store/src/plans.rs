//! Every index on the hot tables is read by a query of hookd's, and no hot query scans a whole
//! table: the plans of the real statements (built by the functions the store runs), on SQLite
//! and PostgreSQL (m0007, decisions 50).

#[cfg(test)]
mod tests {
    use domain::Timestamp;
    use domain::delivery::DeliveryState;
    use domain::ids::{ApplicationId, EndpointId, MessageId, TenantId};
    use sea_orm::{ConnectionTrait, QueryTrait, Statement, TransactionTrait};

    use crate::page::page_query;
    use crate::testing::TestDb;
    use crate::traffic::{
        attempts_of_endpoint, attempts_of_message, explain, message_listing, message_lookup,
    };
    use crate::{AttemptFilter, ListParams, MessageFilter};

    /// (what runs it, the statement, the indexes its plan must name).
    fn hot_statements(
        backend: sea_orm::DbBackend,
    ) -> Vec<(&'static str, Statement, Vec<&'static str>)> {
        let (t, a, e, m) = (
            TenantId::new(),
            ApplicationId::new(),
            EndpointId::new(),
            MessageId::new(),
        );
        let now = Timestamp::now().as_millis();
        let skip = [EndpointId::new(), EndpointId::new()];
        let claim = |fresh: bool| {
            let now = Timestamp::now();
            crate::queue::claim_statement(
                backend,
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
        let deep = ListParams {
            limit: 50,
            iterator: Some(MessageId::new().to_string()),
            ascending: false,
        };
        let by_type = MessageFilter {
            event_types: vec!["invoice.paid".to_owned()],
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
                Statement::from_string(backend, crate::queue::NEXT_DUE_SQL),
                vec!["idx_deliveries_due"],
            ),
            (
                "scheduler: expired leases",
                crate::queue::expired_leases(Timestamp::now()).build(backend),
                vec!["idx_deliveries_leased"],
            ),
            (
                "/metrics: queue gauges",
                Statement::from_string(backend, crate::stats::gauges_sql(now)),
                vec![
                    "idx_deliveries_due",
                    "idx_deliveries_leased",
                    "idx_deliveries_failed",
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
                vec!["idx_messages_event_type"],
            ),
            (
                "API: a message by eventId",
                message_lookup(t, a, "order-1234").build(backend),
                vec!["uq_messages_app_event"],
            ),
            (
                "API: a message's attempts",
                AttemptFilter::default()
                    .apply(t, attempts_of_message(t, m))
                    .build(backend),
                vec!["idx_attempts_msg"],
            ),
            (
                "API: an endpoint's attempts",
                AttemptFilter::default()
                    .apply(t, attempts_of_endpoint(t, e))
                    .build(backend),
                vec!["idx_attempts_endpoint"],
            ),
            (
                "dashboard: an endpoint's dead letters",
                crate::recovery::endpoint_deliveries(t, e, Some(DeliveryState::Failed))
                    .build(backend),
                vec!["idx_deliveries_endpoint"],
            ),
            (
                "retention: the next batch of an application's messages",
                crate::retention::walk_batch(t, a, m, crate::retention::Bound::After(m))
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

    #[tokio::test]
    async fn every_hot_query_reads_its_index_and_no_hot_table_is_scanned_whole() {
        for db in TestDb::all().await {
            let conn = db.store.connection();
            let backend = conn.get_database_backend();
            let mut used = std::collections::BTreeSet::new();
            for (name, stmt, indexes) in hot_statements(backend) {
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
}
