//! `server.watch_config`: a reload whenever the configuration file changes. The directory holding
//! it is watched, not the file: an editor renames a new file over the old one, and a Kubernetes
//! ConfigMap update swaps the `..data` symlink the file resolves through, neither of which an
//! inotify watch on the file itself sees. Every event in that directory starts a short quiet
//! period; after it the file's content (through its symlinks) is compared with what was last
//! seen, so the churn of a swap, or a touch, reloads nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// How long the directory must stay quiet before the file is read: a ConfigMap swap is several
/// events (a new directory, a new link, a rename, a removal) within milliseconds.
const QUIET: Duration = Duration::from_millis(300);

/// Watches the directory holding `file`; the receiver gets one `()` each time the file's content
/// differs from what was last seen (its absence counts as a content: a reload then says why it
/// failed). The watch lasts as long as the receiver.
pub fn changes(file: &Path) -> std::io::Result<mpsc::Receiver<()>> {
    let file = std::path::absolute(file)?;
    let dir = file
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let (events_tx, mut events) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        // Full: a wake-up is pending already, which is all this says.
        if e.is_ok() {
            let _ = events_tx.try_send(());
        }
    })
    .map_err(std::io::Error::other)?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(std::io::Error::other)?;
    let (tx, rx) = mpsc::channel(1);
    let mut seen = std::fs::read(&file).ok();
    crate::util::background::spawn(async move {
        // Owned here: dropping the watcher ends the inotify watch.
        let _watcher = watcher;
        while events.recv().await.is_some() {
            while tokio::time::timeout(QUIET, events.recv())
                .await
                .is_ok_and(|e| e.is_some())
            {}
            let now = std::fs::read(&file).ok();
            if now == seen {
                continue;
            }
            seen = now;
            tracing::info!(file = %file.display(), "the configuration file changed");
            if tx.send(()).await.is_err() {
                break;
            }
        }
    });
    Ok(rx)
}
