//! The pass-through over real sockets: the reverse proxy to the legacy server for what the
//! gateway does not answer (`reverse_proxy`), and the HTTP/1 loop's byte-level relay of
//! `POST`s (`raw_posts`).

#[path = "../support/mod.rs"]
mod support;

mod raw_posts;
mod reverse_proxy;
