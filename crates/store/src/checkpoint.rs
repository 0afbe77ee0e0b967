//! WAL checkpoints beside the writers (SQLite only; decisions 24).
//!
//! SQLite's automatic checkpoint runs inside the commit that pushes the WAL past 1,000 pages, so
//! that commit (and, behind hookd's write turn, every writer queued after it) waits for the
//! pages to be copied into the database file and synced. Connections are opened with
//! `wal_autocheckpoint = 0` instead, and this task runs a PASSIVE checkpoint (which never
//! blocks writers or readers) from its own connection whenever the WAL holds
//! [`CHECKPOINT_AT_FRAMES`] frames not yet copied back.
//!
//! A WAL only starts again from its beginning when a writer finds every frame already copied
//! back, which a checkpoint running beside busy writers never leaves behind: the file would grow
//! for ever. So once the WAL is [`RESTART_AT_FRAMES`] long and the background checkpoint has
//! copied nearly all of it, one more PASSIVE checkpoint runs inside a write turn, where no
//! writer of this process can add frames: it copies the few left, and the next write restarts
//! the WAL. That short turn is the only time a writer waits for a checkpoint.
//!
//! The count comes from the WAL-index (`-shm`) file's header, whose layout is part of SQLite's
//! documented file format: `mxFrame` (last valid frame) at byte 16 and the checkpoint's
//! `nBackfill` (frames copied back) at byte 96, native-endian 32-bit integers. When it cannot be
//! read, a checkpoint runs every second instead.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sea_orm::ConnectionTrait;
use tokio::sync::mpsc::WeakSender;

use crate::Store;

/// Frames (pages) waiting in the WAL that start a checkpoint: SQLite's own default.
const CHECKPOINT_AT_FRAMES: u32 = 1000;
/// A WAL this long (frames) is restarted once nearly all of it is copied back (~16 MB).
const RESTART_AT_FRAMES: u32 = 4000;
/// How often the WAL-index header is read.
const LOOK_EVERY: Duration = Duration::from_millis(25);
/// Without a readable header: a checkpoint this often.
const FALLBACK_EVERY: Duration = Duration::from_secs(1);

/// Runs until every handle of `alive`'s channel (the store's message writer) is gone.
pub(crate) fn spawn<T: Send + 'static>(store: Store, db_file: &Path, alive: WeakSender<T>) {
    let mut shm = db_file.as_os_str().to_owned();
    shm.push("-shm");
    let shm = PathBuf::from(shm);
    tokio::spawn(async move {
        let mut last = Instant::now();
        let mut warned = false;
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            if alive.upgrade().is_none() {
                return;
            }
            let (due, in_turn) = match wal_frames(&shm) {
                Some((frames, backfilled)) => {
                    let waiting = frames.saturating_sub(backfilled);
                    if waiting >= CHECKPOINT_AT_FRAMES {
                        (true, false)
                    } else {
                        // Nothing left to copy: the next write restarts the WAL by itself,
                        // so an idle server does not take write turns to checkpoint nothing.
                        (frames >= RESTART_AT_FRAMES && waiting > 0, true)
                    }
                }
                None => (last.elapsed() >= FALLBACK_EVERY, false),
            };
            if !due {
                continue;
            }
            last = Instant::now();
            let stopped = store.checkpointer.clone().lock_owned().await;
            if *stopped {
                return;
            }
            let turn = if in_turn {
                Some(store.write_turn().await)
            } else {
                None
            };
            let done = store
                .db
                .execute_unprepared("PRAGMA wal_checkpoint(PASSIVE)")
                .await;
            drop(turn);
            drop(stopped);
            if let Err(e) = done
                && !warned
            {
                tracing::warn!(error = %e, "WAL checkpoint failed; will keep trying");
                warned = true;
            }
        }
    });
}

/// (frames in the WAL, frames already copied into the database), from the WAL-index header;
/// `None` when the file is missing, short or not initialised.
fn wal_frames(shm: &Path) -> Option<(u32, u32)> {
    use std::io::Read;
    let mut head = [0u8; 100];
    std::fs::File::open(shm).ok()?.read_exact(&mut head).ok()?;
    let u32_at =
        |at: usize| u32::from_ne_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let is_init = head[12] == 1;
    if !is_init {
        return None;
    }
    Some((u32_at(16), u32_at(96)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_gives_frames_not_yet_backfilled() {
        let shm =
            std::env::temp_dir().join(format!("hookd-shm-test-{}.db-shm", std::process::id()));
        let _ = std::fs::remove_file(&shm);
        assert_eq!(wal_frames(&shm), None, "missing file");
        let mut head = vec![0u8; 136];
        std::fs::write(&shm, &head).unwrap();
        assert_eq!(wal_frames(&shm), None, "not initialised");
        head[12] = 1;
        head[16..20].copy_from_slice(&1500u32.to_ne_bytes());
        head[96..100].copy_from_slice(&400u32.to_ne_bytes());
        std::fs::write(&shm, &head).unwrap();
        assert_eq!(wal_frames(&shm), Some((1500, 400)));
        std::fs::remove_file(&shm).unwrap();
    }
}
