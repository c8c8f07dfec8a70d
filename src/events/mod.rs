//! The queue that fans task updates out to their subscribers, and the domain-event feed's
//! mapping into them.
//!
//! Both producers (the sid bridge and the legacy server's domain-event feed) turn what they
//! read into [`A2aEvent`](crate::model::event::A2aEvent)s and push them into an
//! [`ReplayLog`]; one SSE writer serves both.

pub mod domain;
pub mod feed;
pub(crate) mod frames;
pub mod records;
pub mod replay_log;
pub(crate) mod tick;

pub use replay_log::{Closed, Cursor, Read, ReplayLog, Stored, Subscription, TooManySubscribers};
