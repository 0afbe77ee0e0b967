//! One active scheduler at a time. On PostgreSQL the active one holds a session advisory lock
//! on a connection of its own; if its process dies the connection closes, the lock is released
//! and a standby takes over at its next try. SQLite serves one process, which always leads.

use sea_orm::sqlx::{Connection, PgConnection, Row};

/// An arbitrary, fixed lock key: "hookd" in ASCII.
const LOCK_KEY: i64 = 0x686f6f6b64;

pub enum Leadership {
    /// SQLite: this process is the only one.
    Always,
    Postgres {
        url: String,
        conn: Option<PgConnection>,
    },
}

impl Leadership {
    pub fn for_url(url: &str) -> Leadership {
        if url.starts_with("postgres") {
            Leadership::Postgres {
                url: url.to_owned(),
                conn: None,
            }
        } else {
            Leadership::Always
        }
    }

    /// Whether this process is the active scheduler now; tries to become it if not.
    pub async fn ensure(&mut self) -> bool {
        let Leadership::Postgres { url, conn } = self else {
            return true;
        };
        if let Some(c) = conn {
            // Still leading while the connection that holds the lock is alive.
            if sea_orm::sqlx::query("SELECT 1")
                .execute(&mut *c)
                .await
                .is_ok()
            {
                return true;
            }
            tracing::warn!("scheduler lost its lock connection; standing by");
            *conn = None;
        }
        let Ok(mut c) = PgConnection::connect(url).await else {
            return false;
        };
        let got = sea_orm::sqlx::query("SELECT pg_try_advisory_lock($1) AS ok")
            .bind(LOCK_KEY)
            .fetch_one(&mut c)
            .await
            .ok()
            .and_then(|row| row.try_get::<bool, _>("ok").ok())
            .unwrap_or(false);
        if got {
            tracing::info!("this process is now the active scheduler");
            *conn = Some(c);
        }
        got
    }

    /// Gives the lock up (shutdown), so a standby takes over at once.
    pub async fn release(&mut self) {
        if let Leadership::Postgres { conn, .. } = self
            && let Some(c) = conn.take()
        {
            let _ = c.close().await;
        }
    }
}
