//! WAL checkpoints beside the writers (SQLite only; decisions 24).
//!
//! SQLite's automatic checkpoint runs inside the commit that pushes the WAL past 1,000 pages, so
//! that commit (and, behind hookd's write turn, every writer queued after it) waits for the
//! pages to be copied into the database file and synced. Connections are opened with
//! `wal_autocheckpoint = 0` instead, and this task runs a PASSIVE checkpoint (which never
//! blocks writers or readers) from the pool about every [`CHECKPOINT_AT_FRAMES`] frames written.
//!
//! A WAL only starts again from its beginning when a writer finds every frame already copied
//! back, which a checkpoint running beside busy writers never leaves behind: the file would grow
//! for ever. So once the WAL is [`RESTART_AT_FRAMES`] long, the background pass is followed by
//! one inside a write turn, where no writer of this process can add frames: it copies the few
//! left, and the next write restarts the WAL. That short turn is the only time a writer waits
//! for a checkpoint.
//!
//! The counts come from the checkpoint itself: `PRAGMA wal_checkpoint(PASSIVE)` answers how many
//! frames the WAL holds and how many of them are copied back. A checkpoint that finds nothing
//! new to copy costs a lock and a header read, so the task runs one on a cadence that follows
//! the write rate: the next one is due when, at the rate of frames written since the last,
//! [`CHECKPOINT_AT_FRAMES`] more will be waiting, but never sooner than [`FASTEST`] or later
//! than [`SLOWEST`].
//!
//! The same task watches the disk (issue 34): each pass reads the file system's free space, so
//! the store refuses new messages below its floor (see `health`), and the WAL is started again
//! sooner when space is short — never longer than a quarter of what is free — and given back
//! with a TRUNCATE checkpoint while the disk is below its floor. It also notes a lost WAL index
//! (`health::VIEW_LOST`).
//!
//! The WAL-index (`-shm`) file is never opened outside SQLite. An earlier version read its
//! header with a file of its own every 25 ms, and closing that file dropped every POSIX lock
//! the process held on it (Linux drops a process's locks on a file when any descriptor of it
//! closes), SQLite's included: another process opening the database then found no one using
//! the WAL-index and truncated it under this one's mapping (SIGBUS), and readers' locks no
//! longer kept other processes' checkpoints off the pages they were reading.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DbBackend, Statement};

/// What health answers say once the WAL index is lost (see `health::VIEW_LOST`).
const LOST_CAUSE: &str = "SQLite's WAL index file (-shm) was truncated or replaced by another \
     program; hookd stopped writing and must be restarted";

/// Every SQLite connection's commit hook (the writer thread's and the pool's): `true` (turn
/// the commit into a rollback) once the WAL index is lost. A transaction that was running
/// when the file was truncated may have read zeroed hash pages, missed the WAL's newest copy
/// of a page and changed an older one; committing it would put that older page back (seen:
/// 33 of 50 delivered messages gone from their application's index after the restart). The
/// hook runs before a commit writes its first frame, so no such transaction reaches the WAL,
/// and neither does any later one. The rollback answers `SQLITE_CONSTRAINT_COMMITHOOK`,
/// which the store reads as the database being unavailable.
pub(crate) fn refuse_commit() -> bool {
    crate::health::VIEW_LOST.load(Ordering::Acquire)
}
use tokio::sync::mpsc::WeakSender;

use crate::Store;

/// Frames (pages) a checkpoint should find waiting: SQLite's own autocheckpoint default.
const CHECKPOINT_AT_FRAMES: i64 = 1000;
/// A WAL this long (frames, ~16 MB) gets a pass inside a write turn, so the next write restarts it.
const RESTART_AT_FRAMES: i64 = 4000;
/// The fewest frames that count as a WAL worth restarting or truncating early (~1 MiB).
const SHORT_OF_SPACE_FRAMES: i64 = 256;
/// Bytes a WAL frame takes: a page (SQLite's default 4 KiB) and its 24-byte header.
const FRAME_BYTES: u64 = 4096 + 24;
/// The shortest and longest wait between two checkpoints.
const FASTEST: Duration = Duration::from_millis(25);
const SLOWEST: Duration = Duration::from_millis(250);

/// Runs until every handle of `alive`'s channel (the store's message writer) is gone.
pub(crate) fn spawn<T: Send + 'static>(store: Store, alive: WeakSender<T>, file: PathBuf) {
    tokio::spawn(async move {
        let mut every = FASTEST;
        let mut since = Instant::now(); // the last checkpoint's end
        let mut warned = false;
        let mut frames_before = 0;
        loop {
            tokio::time::sleep(every).await;
            if alive.upgrade().is_none() {
                return;
            }
            let stopped = store.checkpointer.clone().lock_owned().await;
            if *stopped {
                return;
            }
            if crate::health::VIEW_LOST.load(Ordering::Acquire) {
                // No more checkpoints either: one reading this process's view of the WAL
                // could mark frames copied that it never found, and a TRUNCATE would then
                // drop them. Every commit is in the WAL file, indexed afresh at the restart.
                if store.health.view_lost(LOST_CAUSE) {
                    tracing::error!(
                        file = %file.display(),
                        "SQLite's WAL index ({}-shm) was truncated or replaced by another \
                         program while hookd had it open; hookd kept running but stopped \
                         writing, so no process can write from a view of the log that others \
                         do not share. Stop whatever touched the file, then restart hookd: \
                         nothing accepted is lost",
                        file.display()
                    );
                }
                return;
            }
            let free = store.health.free_space();
            if let Some(free) = free {
                store.health.saw_free(free);
            }
            let mut done = passive(&store).await;
            if let Ok(Some((frames, copied))) = done
                && frames >= restart_at(free)
                && (copied < frames || frames != frames_before)
            {
                // Copied beside the writers, so a transaction may have been writing meanwhile,
                // and one that began before the WAL was all copied back appends to it rather
                // than restarting it. Inside a write turn no writer of this process is between
                // BEGIN and COMMIT: this pass copies what is left and the next write restarts
                // the WAL. (An idle WAL already all copied back is left alone.)
                let turn = store.write_turn().await;
                done = passive(&store).await;
                drop(turn);
            }
            // Below the floor the WAL's own file is given back, not only restarted.
            if let Ok(Some((frames, _))) = done
                && frames >= SHORT_OF_SPACE_FRAMES
                && store.health.take_messages().is_err()
            {
                done = truncate(&store).await;
            }
            drop(stopped);
            let took = since.elapsed();
            since = Instant::now();
            if warned && done.is_ok() {
                tracing::info!("WAL checkpoints succeed again");
                warned = false;
            }
            match done {
                Ok(Some((frames, _))) => {
                    // Frames written since the last checkpoint: all of them when the WAL
                    // restarted in between.
                    let new = if frames >= frames_before {
                        frames - frames_before
                    } else {
                        frames
                    };
                    frames_before = frames;
                    // At that rate, when will CHECKPOINT_AT_FRAMES more be waiting?
                    every = took
                        .mul_f64(CHECKPOINT_AT_FRAMES as f64 / new.max(1) as f64)
                        .clamp(FASTEST, SLOWEST);
                }
                Ok(None) => every = SLOWEST,
                Err(e) => {
                    every = SLOWEST;
                    // Once per streak of failures, and once when they end.
                    if !warned {
                        tracing::warn!(error = %e, "WAL checkpoint failed; will keep trying");
                        warned = true;
                    }
                }
            }
        }
    });
}

/// How many frames the WAL may hold before a pass restarts it: [`RESTART_AT_FRAMES`], or a
/// quarter of the free space when that is less, so a WAL cannot fill a small disk by itself.
fn restart_at(free: Option<u64>) -> i64 {
    let Some(free) = free else {
        return RESTART_AT_FRAMES;
    };
    let quarter = i64::try_from(free / 4 / FRAME_BYTES).unwrap_or(i64::MAX);
    quarter.clamp(SHORT_OF_SPACE_FRAMES, RESTART_AT_FRAMES)
}

/// Copies every frame back and truncates the WAL to nothing (also the health probe's, on a
/// full disk: the dialect's `give_back_wal`).
pub(crate) const TRUNCATE: &str = "PRAGMA wal_checkpoint(TRUNCATE)";

/// Copies every frame back and truncates the WAL to nothing, inside a write turn (so no
/// writer of this process adds frames meanwhile; readers are waited for by the busy handler).
/// Gives the WAL's space back to the file system when the disk is short of it.
pub(crate) async fn truncate(store: &Store) -> Result<Option<(i64, i64)>, sea_orm::DbErr> {
    let _turn = store.write_turn().await;
    let row = store
        .db
        .query_one(Statement::from_string(DbBackend::Sqlite, TRUNCATE))
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let busy: i64 = row.try_get_by_index(0)?;
    let frames: i64 = row.try_get_by_index(1)?;
    let copied: i64 = row.try_get_by_index(2)?;
    if busy != 0 {
        tracing::debug!(
            frames,
            copied,
            "TRUNCATE checkpoint could not finish (readers)"
        );
    }
    Ok((frames >= 0).then_some((frames, copied)))
}

/// One PASSIVE checkpoint (never waits for readers or writers): (frames in the WAL, frames
/// copied into the database), or `None` when the database is not in WAL mode.
async fn passive(store: &Store) -> Result<Option<(i64, i64)>, sea_orm::DbErr> {
    let row = store
        .db
        .query_one(Statement::from_string(
            DbBackend::Sqlite,
            "PRAGMA wal_checkpoint(PASSIVE)",
        ))
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let frames: i64 = row.try_get_by_index(1)?;
    let copied: i64 = row.try_get_by_index(2)?;
    Ok((frames >= 0).then_some((frames, copied)))
}
