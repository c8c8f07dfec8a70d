//! The Debian package: `packaging/deb/build.sh` over the test binary; its control data,
//! conffile and unit; installed on this machine with `dpkg -i` (as `.ci/run`'s fresh Debian
//! machine allows), where `wiregate --version` runs from it, the wiregate system user reads its
//! configuration, and `systemd-analyze verify` accepts the unit; purged at the end, whatever
//! happened.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::BIN;
use crate::{repo, require, root_or_skip, run, stdout};

/// Builds the package of the test binary into `out`, shipping `config` when given.
fn build(out: &Path, config: Option<&Path>) -> PathBuf {
    require("dpkg-deb", "dpkg");
    require("objdump", "binutils");
    let mut command = Command::new(repo().join("packaging/deb/build.sh"));
    command.arg(BIN).arg(out);
    if let Some(c) = config {
        command.arg(c);
    }
    PathBuf::from(stdout(&mut command).trim())
}

/// One file of the package's data, as text.
fn file_in(deb: &Path, path: &str) -> String {
    let tar = run(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb)).stdout;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.tar"), tar).unwrap();
    stdout(
        Command::new("tar")
            .arg("-xOf")
            .arg(dir.path().join("data.tar"))
            .arg(format!("./{path}")),
    )
}

/// Purges the package when dropped, so a failed assertion leaves the machine as it was.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = dpkg(&["--purge", "wiregate"]);
    }
}

/// Runs dpkg, waiting (up to a minute) while another dpkg or apt holds its lock.
fn dpkg(args: &[&str]) -> std::process::Output {
    let start = Instant::now();
    loop {
        let out = Command::new("dpkg").args(args).output().unwrap();
        let locked = String::from_utf8_lossy(&out.stderr).contains("lock");
        if out.status.success() || !locked || start.elapsed() > Duration::from_secs(60) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn the_package_builds_installs_runs_and_its_unit_verifies() {
    if !root_or_skip("the_package_builds_installs_runs_and_its_unit_verifies") {
        return;
    }
    let installed_before = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "wiregate"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("ok installed"));
    assert!(
        !installed_before,
        "a wiregate package is installed on this machine already: not replacing it"
    );
    let out = tempfile::tempdir().unwrap();
    let deb = build(out.path(), None);
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        deb.ends_with(format!(
            "wiregate_{version}_{}.deb",
            stdout(Command::new("dpkg").arg("--print-architecture")).trim()
        )),
        "{}",
        deb.display()
    );
    let info = stdout(Command::new("dpkg-deb").arg("--info").arg(&deb));
    for field in [
        "Package: wiregate",
        &format!("Version: {version}"),
        "adduser",
    ] {
        assert!(info.contains(field), "{field} in\n{info}");
    }
    let control = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(&deb)
        .arg(control.path()));
    assert_eq!(
        std::fs::read_to_string(control.path().join("conffiles")).unwrap(),
        "/etc/wiregate/gateway.toml\n"
    );

    // The unit: hardened, notify, reload by SIGHUP, sized for server.max_connections (16 384).
    let unit = file_in(&deb, "lib/systemd/system/wiregate.service");
    for line in [
        "Type=notify",
        "User=wiregate",
        "ExecStart=/usr/bin/wiregate --config /etc/wiregate/gateway.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=on-failure",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "LimitNOFILE=33792",
        "CapabilityBoundingSet=\n",
        "AmbientCapabilities=\n",
        "TimeoutStopSec=15\n",
    ] {
        assert!(unit.contains(line), "{line:?} in\n{unit}");
    }

    // Installed: the binary runs, the user exists and reads its configuration.
    let guard = Installed;
    let out_install = dpkg(&["-i", deb.to_str().unwrap()]);
    assert!(
        out_install.status.success(),
        "dpkg -i: {}",
        String::from_utf8_lossy(&out_install.stderr)
    );
    let version_line = stdout(Command::new("/usr/bin/wiregate").arg("--version"));
    assert!(
        version_line.starts_with(&format!("wiregate {version} (")),
        "{version_line}"
    );
    let user = stdout(Command::new("getent").args(["passwd", "wiregate"]));
    assert!(user.contains("/usr/sbin/nologin"), "a system user: {user}");
    let effective = stdout(Command::new("runuser").args([
        "-u",
        "wiregate",
        "--",
        "/usr/bin/wiregate",
        "check-config",
        "--config",
        "/etc/wiregate/gateway.toml",
    ]));
    assert!(
        effective.contains("listen = \"127.0.0.1:8080\""),
        "{effective}"
    );

    // systemd's own checker: no error, no warning.
    require("systemd-analyze", "systemd");
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no", "/lib/systemd/system/wiregate.service"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(
        verify.status.success() && !said.contains("wiregate.service"),
        "systemd-analyze verify: {}\n{said}",
        verify.status
    );

    drop(guard);
    assert!(!Path::new("/usr/bin/wiregate").exists(), "purged");
    assert!(!Path::new("/etc/wiregate").exists(), "purged");
}

/// A configuration on a port below 1024 gets the one capability that binds it, and a unit
/// whose stop timeout covers its drain and grace.
#[test]
fn a_low_port_gets_its_capability_and_the_timeouts_follow_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"0.0.0.0:443\"\nmax_connections = 1000\ndrain_ms = 5000\n\
         shutdown_grace_ms = 20000\n",
    )
    .unwrap();
    let deb = build(dir.path(), Some(&config));
    let unit = file_in(&deb, "lib/systemd/system/wiregate.service");
    for line in [
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE\n",
        "LimitNOFILE=3024\n",
        "TimeoutStopSec=30\n",
    ] {
        assert!(unit.contains(line), "{line:?} in\n{unit}");
    }
    assert_eq!(
        file_in(&deb, "etc/wiregate/gateway.toml"),
        std::fs::read_to_string(&config).unwrap()
    );
}
