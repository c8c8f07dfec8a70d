//! Running wiregate as operators do, from what the repository ships: readiness, reloads and
//! shutdown as systemd hears them and the drain a load balancer sees (`service`); a reload on a
//! Kubernetes-style symlink swap of the configuration (`watch`); the Debian package built from
//! the test binary, installed with `dpkg -i`, run and its unit verified (`deb`); the OCI image
//! built with buildah, unpacked and run under `chroot` (`oci`); the Kubernetes manifests
//! against the API's schemas, and the configurations they embed against `check-config`
//! (`kubernetes`).
//!
//! Packaging uses the debug binary cargo built for the tests, never a release build of its
//! own. `deb` and `oci` install packages and `chroot`: as root only, else they say why they
//! did nothing.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod deb;
mod kubernetes;
mod oci;
mod service;
mod watch;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root: where the packaging scripts and manifests are.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the tests run as root; when not, says which test did nothing, and why.
fn root_or_skip(test: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        eprintln!("{test}: SKIPPED: needs root (dpkg -i, buildah, chroot); CI runs as root");
    }
    root
}

/// `tool`'s path, or a failure naming the Debian package that provides it.
fn require(tool: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("{tool} is not installed: apt-get install {package}"))
}

/// Runs `command`, failing with its output unless it exits 0.
fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// [`run`]'s standard output as text.
fn stdout(command: &mut Command) -> String {
    String::from_utf8_lossy(&run(command).stdout).into_owned()
}
