//! The sid bridge over real child processes (the fake sid), an attached socket and real SSE
//! parsing: turns and resumes (`bridge`), the streams' frames, ticks and subscribers
//! (`streams`), sid on a socket (`socket`), the fake sid against the recorded transcripts (`fake_sid`),
//! a line of sid's over the cap (`long_lines`).
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod bridge;
mod fake_sid;
mod long_lines;
mod socket;
mod streams;
