//! Which of the per-core workers (`server.runtime = "per_core"`) runs the calling thread, so
//! that state kept per worker is used by the thread whose I/O driver owns it.
//!
//! A per-core worker is a thread with a current-thread runtime and its own listening socket.
//! A socket is registered with the I/O driver of the runtime it was opened on: a pooled
//! upstream connection opened on worker 1 and reused by worker 2 has its readiness reported to
//! worker 1's driver, which then wakes worker 2 across threads (a futex and an `eventfd` write
//! a call). Keeping idle connections per worker ([`slot`]) keeps each one on its own thread.
//! Threads that are no worker (a work-stealing runtime's, the main thread) are slot 0.

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// The calling thread's slot, set once by [`enter`] (0 on threads that are no worker).
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// Names the calling thread per-core worker `i` (from 0): slot `i + 1`, workers beyond the
/// cores sharing slots.
pub(crate) fn enter(i: usize) {
    SLOT.with(|c| c.set(1 + i % (slots() - 1)));
}

/// How many slots state kept per worker has: one per core, and one for the threads that are
/// no worker. Read once.
pub(crate) fn slots() -> usize {
    static SLOTS: OnceLock<usize> = OnceLock::new();
    *SLOTS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(64)) + 1)
}

/// The calling thread's slot, below [`slots`]: 0 for a thread that is no worker. A
/// thread-local read, on the call path twice a call (the pool's checkout and checkin).
#[inline]
pub(crate) fn slot() -> usize {
    SLOT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_thread_has_its_own_slot_and_other_threads_slot_0() {
        assert_eq!(slot(), 0);
        let n = slots();
        let seen: Vec<usize> = (0..n + 1)
            .map(|i| {
                std::thread::spawn(move || {
                    enter(i);
                    slot()
                })
                .join()
                .unwrap()
            })
            .collect();
        // Workers 0..n-1 take slots 1..n-1 in turn, and every slot is in range.
        assert_eq!(seen[0], 1);
        assert!(seen.iter().all(|s| (1..n).contains(s)));
        assert_eq!(seen[n - 1], 1, "the worker past the cores wraps");
    }
}
