//! A fake `sid --raw` (protocol 5) for tests and benchmarks; see `wiregate::demo::sid`.
//!
//! ```sh
//! cargo run --example fake_sid -- --raw
//! cargo run --example fake_sid -- --listen unix:///tmp/sid.sock
//! ```
#![forbid(unsafe_code)]

fn main() {
    wiregate::demo::sid::run(std::env::args().skip(1).collect());
}
