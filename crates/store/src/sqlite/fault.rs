//! Which SQLite errors mean the database cannot take writes right now, by SQLite's extended
//! result codes (never by message text), from both drivers hookd uses on SQLite: sqlx under
//! sea-orm, and rusqlite on the hot path (decisions 25).

use crate::error::{StorageFault, StoreError};

/// SQLite primary result codes (the low byte of an extended code).
const SQLITE_READONLY: i32 = 8;
const SQLITE_IOERR: i32 = 10;
const SQLITE_FULL: i32 = 13;
const SQLITE_CANTOPEN: i32 = 14;
/// A commit turned into a rollback by the commit hook: only ever after the WAL index was
/// lost (see `checkpoint::refuse_commit`).
const SQLITE_CONSTRAINT_COMMITHOOK: i32 = 19 | (2 << 8);

fn of_code(extended: i32) -> Option<StorageFault> {
    if extended == SQLITE_CONSTRAINT_COMMITHOOK {
        return Some(StorageFault::Unavailable);
    }
    match extended & 0xff {
        SQLITE_FULL => Some(StorageFault::Full),
        SQLITE_READONLY => Some(StorageFault::ReadOnly),
        SQLITE_IOERR | SQLITE_CANTOPEN => Some(StorageFault::Unavailable),
        _ => None,
    }
}

/// A database error raised through sqlx, if SQLite raised it (`Dialect::database_fault`).
pub(crate) fn database_fault(
    e: &(dyn sea_orm::sqlx::error::DatabaseError + 'static),
) -> Option<StorageFault> {
    let e = e.try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()?;
    of_code(sea_orm::sqlx::error::DatabaseError::code(e)?.parse().ok()?)
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        let fault = match &e {
            rusqlite::Error::SqliteFailure(f, _) => of_code(f.extended_code),
            _ => None,
        };
        StoreError::Driver {
            fault,
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{StorageFault, StoreError};

    /// A SQLite file with one table, and a write to it over a read-only connection from both
    /// drivers hookd uses: each is judged ReadOnly by its code.
    #[tokio::test]
    async fn a_write_to_a_read_only_sqlite_file_is_a_read_only_fault() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.db");
        let rw = rusqlite::Connection::open(&path).unwrap();
        rw.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        drop(rw);

        let ro = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let e = StoreError::from(ro.execute("INSERT INTO t VALUES (1)", []).unwrap_err());
        assert_eq!(e.storage_fault(), Some(StorageFault::ReadOnly), "{e}");

        use sea_orm::ConnectionTrait;
        let url = format!("sqlite://{}?mode=ro", path.display());
        let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
        let e = StoreError::from(
            db.execute_unprepared("INSERT INTO t VALUES (1)")
                .await
                .unwrap_err(),
        );
        assert_eq!(e.storage_fault(), Some(StorageFault::ReadOnly), "{e}");

        // A mistake of the statement is not a storage fault.
        let e = StoreError::from(
            db.execute_unprepared("SELECT nope FROM t")
                .await
                .unwrap_err(),
        );
        assert_eq!(e.storage_fault(), None, "{e}");
        let e = StoreError::from(ro.execute("SELECT nope FROM t", []).unwrap_err());
        assert_eq!(e.storage_fault(), None, "{e}");
    }
}
