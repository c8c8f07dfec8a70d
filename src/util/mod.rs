//! Small helpers every layer may use: the process's monotonic clock and the wall clock read
//! through it, the call timers, hex digits, the call path's random ids, the bounded maps of
//! what clients send, the comparison of secrets, URLs with their credentials redacted, which
//! worker thread runs a call and where the tasks that outlive it go.

pub(crate) mod background;
pub(crate) mod bounded;
pub(crate) mod clock;
pub(crate) mod hex;
pub(crate) mod ids;
pub(crate) mod prehashed;
pub(crate) mod redact;
pub(crate) mod secret;
pub(crate) mod time;
pub(crate) mod timer;
pub(crate) mod worker;
