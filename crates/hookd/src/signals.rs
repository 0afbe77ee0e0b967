//! SIGBUS from SQLite's WAL index, mended instead of killing the process (issue 34).
//!
//! SQLite maps its WAL index, the database's `-shm` file, into memory. When another program
//! truncates that file under a running hookd, the next touch of a mapped page past the new end
//! raises SIGBUS, whose default action killed hookd within 0.2 s without a line of log. The
//! handler installed here instead maps a private zero page over the one that faulted, so the
//! touch completes, and raises [`store::VIEW_LOST`]: the store then stops writing and says
//! so once, loudly (see `store::StorageHealth`). This process's view of the WAL no longer
//! matches other processes', so it stays that way until a restart; nothing accepted is lost,
//! since every commit is in the WAL file, which SQLite indexes afresh on the next start.
//!
//! The handler does only what is safe in a signal handler: one `mmap`, atomic stores. At most
//! [`MAX_PAGES`] pages are mended; past that, or when the fault has no address, the default
//! action is restored and the fault repeats into it.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The most pages mended in one process (the WAL index of a 100,000-frame WAL is ~800 KiB).
const MAX_PAGES: usize = 4096;

static MENDED: AtomicUsize = AtomicUsize::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; mmap with
    // MAP_FIXED over a page of this process's own address space, anonymous and private,
    // replaces only that page; signal() restores the default action. All three are
    // async-signal-safe.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let page = PAGE.load(Ordering::Relaxed);
        if addr != 0 && MENDED.fetch_add(1, Ordering::Relaxed) < MAX_PAGES {
            let base = addr & !(page - 1);
            let mapped = libc::mmap(
                base as *mut libc::c_void,
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
            if mapped != libc::MAP_FAILED {
                store::VIEW_LOST.store(true, Ordering::Release);
                return;
            }
        }
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
    }
}

/// Installs the handler (a SQLite database only; see the module's text).
pub fn mend_sigbus() -> std::io::Result<()> {
    // SAFETY: sysconf has no preconditions; sigaction is given a zeroed, then filled,
    // struct whose handler is an `extern "C"` function of the right signature.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE);
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
