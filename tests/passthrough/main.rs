//! The pass-through over real sockets: the reverse proxy to the legacy server for what the
//! gateway does not answer (`reverse_proxy`), the HTTP/1 loop's byte-level relay of `POST`s
//! (`raw_posts`), the same headers sent by both relay paths (`both_paths`), and CORS for
//! browsers on other origins, the pass-through included (`cors`).
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod both_paths;
mod cors;
mod raw_posts;
mod reverse_proxy;
