//! What the service manager is told (systemd's `Type=notify`): ready once the listener is bound,
//! reloading and ready again around each reload, stopping at shutdown. `systemctl start` returns
//! when the gateway takes connections, and the unit's state shows a reload in progress. Without
//! `$NOTIFY_SOCKET` (not started by systemd) each call does nothing.

use sd_notify::NotifyState;

/// Sends `states`; a failure is logged, never fatal: the gateway serves all the same.
fn tell(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "could not notify the service manager");
    }
}

/// The listener is bound and serving.
pub fn ready() {
    tell(&[NotifyState::Ready]);
}

/// A reload starts; [`ready`] says when it is over. `MONOTONIC_USEC` lets systemd 253's
/// `Type=notify-reload` match it to the signal it sent.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => tell(&[NotifyState::Reloading, now]),
        Err(_) => tell(&[NotifyState::Reloading]),
    }
}

/// Shutdown begins (draining first, when `server.drain_ms` asks for it).
pub fn stopping() {
    tell(&[NotifyState::Stopping]);
}
