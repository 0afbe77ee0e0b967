//! Which PostgreSQL errors mean the database cannot take writes right now, by SQLSTATE
//! (never by message text).

use crate::error::StorageFault;

fn of_sqlstate(state: &str) -> Option<StorageFault> {
    match state {
        "25006" => Some(StorageFault::ReadOnly),
        "53100" => Some(StorageFault::Full),
        "57P01" | "57P02" | "57P03" => Some(StorageFault::Unavailable),
        s if s.starts_with("08") => Some(StorageFault::Unavailable),
        _ => None,
    }
}

/// A database error raised through sqlx, if PostgreSQL raised it (`Dialect::database_fault`).
pub(crate) fn database_fault(
    e: &(dyn sea_orm::sqlx::error::DatabaseError + 'static),
) -> Option<StorageFault> {
    let e = e.try_downcast_ref::<sea_orm::sqlx::postgres::PgDatabaseError>()?;
    of_sqlstate(e.code())
}

#[cfg(test)]
mod tests {
    use super::of_sqlstate;
    use crate::error::{StorageFault, StoreError};

    #[test]
    fn postgres_states_are_judged_by_sqlstate() {
        assert_eq!(of_sqlstate("25006"), Some(StorageFault::ReadOnly));
        assert_eq!(of_sqlstate("53100"), Some(StorageFault::Full));
        for s in ["57P01", "57P02", "57P03", "08006", "08001"] {
            assert_eq!(of_sqlstate(s), Some(StorageFault::Unavailable), "{s}");
        }
        for s in ["23505", "42P01", "40001", "53200"] {
            assert_eq!(of_sqlstate(s), None, "{s}");
        }
    }

    /// A write in a read-only session, as PostgreSQL answers it through sea-orm: judged
    /// ReadOnly by the error PostgreSQL raised, which the store tells from SQLite's by its type.
    #[tokio::test]
    async fn a_write_in_a_read_only_session_is_a_read_only_fault() {
        let Some(url) = crate::testing::postgres_url() else {
            eprintln!("SKIPPED: HOOKD_TEST_POSTGRES_URL is not set");
            return;
        };
        use sea_orm::ConnectionTrait;
        let mut opts = sea_orm::ConnectOptions::new(url);
        opts.max_connections(1).sqlx_logging(false);
        let db = sea_orm::Database::connect(opts).await.unwrap();
        db.execute_unprepared("SET default_transaction_read_only = on")
            .await
            .unwrap();
        let e = StoreError::from(
            db.execute_unprepared("CREATE TEMP TABLE hookd_ro_probe (x int)")
                .await
                .unwrap_err(),
        );
        assert_eq!(e.storage_fault(), Some(StorageFault::ReadOnly), "{e}");
        // A mistake of the statement is not a storage fault.
        let e = StoreError::from(db.execute_unprepared("SELECT nope").await.unwrap_err());
        assert_eq!(e.storage_fault(), None, "{e}");
    }
}
