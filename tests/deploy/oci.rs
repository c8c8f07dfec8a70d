//! The OCI image: `packaging/oci/build.sh` over the test binary, with buildah on a storage of
//! the test's own, written out as an oci-archive; its configuration's labels, user and port;
//! unpacked with umoci, holding the binary, its libraries, the CA roots and the user's lines
//! and nothing else; and run from its filesystem under `chroot` as that user: `--version`,
//! `check-config` of the shipped file, and one call translated by `--demo`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::BIN;
use crate::{repo, require, root_or_skip, run, stdout};

const IMAGE: &str = "localhost/wiregate:test";

/// A blob of the OCI layout at `layout`, by its digest, as JSON.
fn blob(layout: &Path, digest: &Value) -> Value {
    let digest = digest.as_str().unwrap().replace(':', "/");
    serde_json::from_slice(&std::fs::read(layout.join("blobs").join(digest)).unwrap()).unwrap()
}

/// Every file and link under `root`, relative, sorted.
fn files(root: &Path, under: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(under).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            files(root, &path, out);
        } else {
            out.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
    out.sort();
}

/// `chroot` into `rootfs` as the image's user (65532), running the image's binary.
fn in_image(rootfs: &Path) -> Command {
    let mut c = Command::new(require("chroot", "coreutils"));
    c.arg("--userspec=65532:65532")
        .arg(rootfs)
        .arg("/usr/bin/wiregate")
        .env_clear();
    c
}

#[test]
fn the_image_builds_and_its_filesystem_runs_the_gateway() {
    if !root_or_skip("the_image_builds_and_its_filesystem_runs_the_gateway") {
        return;
    }
    require("buildah", "buildah");
    require("umoci", "umoci");
    let work = tempfile::tempdir().unwrap();
    let storage = work.path().join("storage");
    let archive = work.path().join("image.tar");
    let built = stdout(
        Command::new(repo().join("packaging/oci/build.sh"))
            .arg(BIN)
            .arg(IMAGE)
            .env(
                "BUILDER_ARGS",
                format!(
                    "--root {0}/root --runroot {0}/run --storage-driver vfs",
                    storage.display()
                ),
            )
            .env("OCI_ARCHIVE", &archive),
    );
    assert_eq!(built.trim(), IMAGE);

    // The image's configuration: labels with the version and the commit, its user and port.
    let layout = work.path().join("layout");
    std::fs::create_dir(&layout).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&layout));
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = blob(&layout, &index["manifests"][0]["digest"]);
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1, "one layer");
    let config = blob(&layout, &manifest["config"]["digest"]);
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    let version_line = stdout(Command::new(BIN).arg("--version"));
    let commit = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap();
    assert!(
        !commit.is_empty() && version_line.contains(&format!("({commit})")),
        "{commit} vs {version_line}"
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(config["config"]["ExposedPorts"], json!({"8080/tcp": {}}));
    assert_eq!(config["config"]["Entrypoint"], json!(["/usr/bin/wiregate"]));

    // Its filesystem: the binary, its libraries, CA roots, the user, the configuration.
    let bundle = work.path().join("bundle");
    run(Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:{IMAGE}", layout.display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    let mut found = Vec::new();
    files(&rootfs, &rootfs, &mut found);
    let libraries: Vec<&String> = found.iter().filter(|f| f.contains(".so")).collect();
    assert!(
        libraries.iter().any(|l| l.contains("libc.so"))
            && libraries.iter().any(|l| l.contains("ld-linux")),
        "{found:?}"
    );
    let rest: Vec<&String> = found.iter().filter(|f| !f.contains(".so")).collect();
    assert_eq!(
        rest,
        [
            "etc/group",
            "etc/passwd",
            "etc/ssl/certs/ca-certificates.crt",
            "etc/wiregate/gateway.toml",
            "usr/bin/wiregate",
        ],
        "nothing else"
    );

    let version = stdout(in_image(&rootfs).arg("--version"));
    assert_eq!(version, version_line);
    let effective = stdout(
        in_image(&rootfs)
            .arg("check-config")
            .arg("--config")
            .arg("/etc/wiregate/gateway.toml"),
    );
    assert!(
        effective.contains("listen = \"0.0.0.0:8080\""),
        "{effective}"
    );

    // --demo from the image, and one JSON-RPC call translated to the legacy envelope and back.
    let mut demo = in_image(&rootfs)
        .args(["--demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kept open to the end: the demo prints its guide after the first line.
    let mut guide = BufReader::new(demo.stdout.take().unwrap()).lines();
    let first = guide.next().unwrap().unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    let answer: Value = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let call = reqwest::Client::new()
            .post(format!("http://{addr}/rpc"))
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":{"hi":1}}"#)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap();
        call.json().await.unwrap()
    });
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 7, "result": {"hi": 1}})
    );
    // SIGTERM, so the gateway stops its demo sid child too.
    run(Command::new("kill").args(["-TERM", &demo.id().to_string()]));
    let _ = demo.wait();
    drop(guide);
}
