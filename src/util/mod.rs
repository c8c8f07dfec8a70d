//! Small helpers every layer may use: the wall clock read through the monotonic clock, hex
//! digits, the call path's random ids.

pub mod clock;
pub mod hex;
pub mod ids;
pub mod time;
