//! The sid bridge over real child processes (the fake sid), an attached socket and real SSE
//! parsing: turns, streams and resumes (`bridge`), the children stopped at shutdown (`shutdown`),
//! sid on a socket (`socket`), the fake sid against the recorded transcripts (`fake_sid`).

#[path = "../support/mod.rs"]
mod support;

mod bridge;
mod fake_sid;
mod shutdown;
mod socket;
