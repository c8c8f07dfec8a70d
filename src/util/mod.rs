//! Small helpers every layer may use: the wall clock read through the monotonic clock, hex
//! digits, the call path's random ids.

pub(crate) mod clock;
pub(crate) mod hex;
pub(crate) mod ids;
pub(crate) mod prehashed;
pub(crate) mod time;
