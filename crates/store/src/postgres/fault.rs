//! Which PostgreSQL errors mean the database cannot take writes: judged by SQLSTATE, never by
//! message text (see [`crate::StoreError::storage_fault`]).

use sea_orm::sqlx::error::DatabaseError;

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

/// An error sqlx reported for PostgreSQL; `None` for another database's.
pub(crate) fn of_sqlx(db: &dyn DatabaseError) -> Option<StorageFault> {
    db.try_downcast_ref::<sea_orm::sqlx::postgres::PgDatabaseError>()?;
    of_sqlstate(&db.code()?)
}

#[cfg(test)]
mod tests {
    use super::of_sqlstate;
    use crate::StorageFault;

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
}
