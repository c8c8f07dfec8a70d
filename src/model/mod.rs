//! The pure domain: the task model, task updates and their payloads, and the request path's
//! one error enum. No I/O; every layer above reads these types.

pub mod a2a;
pub mod error;
pub mod event;
pub mod payload;
pub mod task;
