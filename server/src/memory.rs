//! Handing freed memory back to the operating system when requests end.
//!
//! What a request holds is bounded and freed when it ends (a stalled stream holds at most its
//! reset window and the connection's buffers), but glibc's `malloc` keeps what is freed in its
//! arenas (one per thread that allocated, several per core) and returns only the top of a heap
//! to the system: after 20 stalled streams left, the process kept 53 MB of its 55 MB peak
//! (238 of 254 MB after 200). `malloc_trim(0)` hands every free page of every arena back
//! (`madvise`), and [`Release`] calls it off the async threads after requests end and after a
//! runtime thread stops (the binary's blocking pool lets a thread go after 10 s idle, and with it
//! its arena's use), at most once per [`TRIM_EVERY`], so memory returns within about that long
//! after clients leave. The allocator is the process's, so is the one [`Release`] ([`release`]).
//!
//! Where the C library is not glibc (musl, macOS, Windows), the system allocator is left as it
//! is: those return freed memory on their own, and [`Release::mode`] says `"none"`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// The shortest time between two trims: a burst of requests ending is one trim, then another
/// for what the burst's last requests freed.
pub const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Trims the allocator after requests end.
pub struct Release {
    wake: Notify,
    ended: AtomicU64,
    trims: AtomicU64,
}

static RELEASE: Release = Release {
    wake: Notify::const_new(),
    ended: AtomicU64::new(0),
    trims: AtomicU64::new(0),
};

/// The process's [`Release`].
pub fn release() -> &'static Release {
    &RELEASE
}

/// For a runtime's `on_thread_stop`: a thread that stops leaves its arena's memory free.
pub fn thread_stopped() {
    RELEASE.wake.notify_one();
}

impl Release {
    /// A request ended (what it held was freed): trim soon.
    pub fn ended(&self) {
        self.ended.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// How many requests ended, in the whole process.
    pub fn requests_ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// How many times the allocator was trimmed, in the whole process.
    pub fn trims(&self) -> u64 {
        self.trims.load(Ordering::Relaxed)
    }

    /// `{"ended": requests, "trims": n, "mode": "malloc_trim"|"none"}` (`/stats`; the counts
    /// are the process's).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "ended": self.requests_ended(),
            "trims": self.trims(),
            "mode": Release::mode(),
        })
    }

    /// How freed memory is handed back: `"malloc_trim"` (glibc) or `"none"` (the system
    /// allocator's own way).
    pub fn mode() -> &'static str {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            "malloc_trim"
        } else {
            "none"
        }
    }

    /// Trims after each [`Release::ended`], at most once per [`TRIM_EVERY`], until `stop`
    /// turns `true` (each server runs one; with several in a process, one of them trims). Returns
    /// at once where there is nothing to trim.
    pub async fn run(&'static self, mut stop: watch::Receiver<bool>) {
        if Release::mode() == "none" {
            return;
        }
        loop {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            if tokio::task::spawn_blocking(trim).await.is_err() {
                return;
            }
            self.trims.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = tokio::time::sleep(TRIM_EVERY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

/// Caps glibc's `malloc` arenas at two per core (its default is up to eight per core, one per
/// thread that allocates): memory a request freed on one blocking-pool thread is then reused
/// by the next request's thread, not kept in an arena of its own until the next trim. Eight
/// answers of one 100 MB line, built two at a time ([`crate::answers`]), peaked at 1.18 GB
/// with the default arenas and 0.77 GB with this. For a binary's `main`, before it starts
/// threads; nothing where the C library is not glibc.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = (2 * cores).clamp(2, 64) as libc::c_int;
        // SAFETY: mallopt takes no pointer; called before the process has other threads.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointer; it locks each arena while it releases its free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
