//! A2A over real sockets and the fake sid: shapes and errors (`shapes`), tasks and history
//! (`tasks`), several tasks queued in one context (`queue`), A2A's own JSON-RPC binding
//! (`binding`), push notifications to a webhook receiver (`push`), the REST binding (`rest`), the
//! official SDK client (`sdk`).
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod binding;
mod push;
mod queue;
mod rest;
mod sdk;
mod shapes;
mod tasks;
