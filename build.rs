//! Tells the binary which commit it was built from (`wiregate --version`): `git rev-parse`, or
//! `unknown` outside a git checkout.
#![forbid(unsafe_code)]

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    // Not `WIREGATE_…`: cargo also sets it for the programs it runs, and the configuration
    // reads every `WIREGATE_…` variable as a key.
    println!("cargo:rustc-env=WG_BUILD_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names.
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        if let Some(r) = head.strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed=.git/{}", r.trim());
        }
    }
}
