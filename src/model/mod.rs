//! The pure domain: the task model, task updates and their payloads, and the request path's
//! one error enum. No I/O; every layer above reads these types.

pub(crate) mod a2a;
pub(crate) mod error;
pub mod event;
pub(crate) mod payload;
pub mod task;
