//! The runtime that runs what outlives a call (sid sessions, the cluster link, exporters,
//! feeds), for code that starts such a task from a call.
//!
//! With per-core workers (`server.runtime = "per_core"`) a call runs on a worker's own
//! current-thread runtime, which serves connections only; a task it starts that must outlive
//! the call goes to the runtime that started the gateway ([`enter`] names it on each worker).
//! Everywhere else [`spawn`] is `tokio::spawn`.

use std::cell::RefCell;
use std::future::Future;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

thread_local! {
    static BACKGROUND: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Names `handle` the calling thread's background runtime.
pub(crate) fn enter(handle: Handle) {
    BACKGROUND.with(|b| *b.borrow_mut() = Some(handle));
}

/// The background runtime: the one [`enter`] named on this thread, else the current one
/// (`None` outside any runtime).
pub(crate) fn handle() -> Option<Handle> {
    BACKGROUND
        .with(|b| b.borrow().clone())
        .or_else(|| Handle::try_current().ok())
}

/// Runs `f` in the background runtime's context, so that what it starts (tasks, child
/// processes, sockets) belongs to that runtime.
pub(crate) fn within<T>(f: impl FnOnce() -> T) -> T {
    match BACKGROUND.with(|b| b.borrow().clone()) {
        Some(h) => {
            let _entered = h.enter();
            f()
        }
        None => f(),
    }
}

/// Starts `task` on the background runtime (see [`handle`]). Panics outside a runtime, as
/// `tokio::spawn` does.
pub(crate) fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    within(|| tokio::spawn(task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_goes_to_the_named_runtime() {
        let background = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let worker = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (bg_handle, bg_thread) = (background.handle().clone(), std::thread::current().id());
        let spawned = std::thread::spawn(move || {
            enter(bg_handle);
            // Started from within another runtime, it runs where `enter` said.
            let _entered = worker.enter();
            spawn(async { std::thread::current().id() })
        })
        .join()
        .unwrap();
        assert_eq!(background.block_on(spawned).unwrap(), bg_thread);
    }
}
