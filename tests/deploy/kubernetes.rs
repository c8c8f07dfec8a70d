//! The Kubernetes manifests of `deploy/kubernetes/`: every resource valid against the API's
//! OpenAPI schemas (kubernetes-validate, strict: an unknown field fails), the parts the issue
//! names present (a ConfigMap, a Deployment probing `/healthz` and `/readyz`, a Service, a
//! PodDisruptionBudget; Redis beside the replicas), every embedded `gateway.toml` accepted by
//! `check-config`, watched, draining, mounted as a directory (so ConfigMap updates reach it)
//! and given the time it drains and finishes calls in.
//!
//! kubernetes-validate lives in the virtualenv under `target/` that `.ci/run` makes; the test
//! installs it there itself when it is missing, so `cargo test` alone works.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

use crate::support::BIN;
use crate::{repo, run, stdout};

const VALIDATOR: &str = "kubernetes-validate==1.37.0";

/// The Kubernetes version the manifests are held to.
const KUBERNETES: &str = "1.33.0";

/// The virtualenv's bin directory, with kubernetes-validate in it.
fn venv_bin() -> PathBuf {
    static MAKING: Mutex<()> = Mutex::new(());
    let venv = repo().join("target/a2a-venv");
    let bin = venv.join("bin");
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let ready = || {
        Command::new(bin.join("python"))
            .args(["-c", "import kubernetes_validate, yaml"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ready() {
        if !bin.join("pip").exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        }
        run(Command::new(bin.join("pip")).args(["install", "--quiet", VALIDATOR]));
    }
    assert!(
        ready(),
        "{VALIDATOR} is not importable from {}",
        venv.display()
    );
    bin
}

/// The documents of a manifest file, as JSON.
fn documents(python: &PathBuf, file: &str) -> Vec<Value> {
    let text = stdout(Command::new(python).arg("-c").arg(
        "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], sys.stdout)",
    ).arg(repo().join(file)));
    serde_json::from_str(&text).unwrap()
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut k: Vec<String> = docs
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect();
    k.sort();
    k
}

/// Checks one file's gateway Deployment against the ConfigMap it mounts.
fn check_gateway(docs: &[Value], deployment: &str) {
    let dep = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == deployment)
        .unwrap_or_else(|| panic!("no Deployment {deployment}"));
    let pod = &dep["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(
        container["lifecycle"]["preStop"].is_null(),
        "the drain needs no preStop hook"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args, ["--config", "/etc/wiregate/gateway.toml"]);
    let mount = &container["volumeMounts"][0];
    assert_eq!(mount["mountPath"], "/etc/wiregate");
    assert!(mount["subPath"].is_null(), "a subPath mount never updates");
    let map = pod["volumes"][0]["configMap"]["name"].as_str().unwrap();
    let config_map = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == map)
        .unwrap_or_else(|| panic!("no ConfigMap {map}"));
    let text = config_map["data"]["gateway.toml"].as_str().unwrap();

    // check-config, as the binary reads it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    let effective: toml::Value = toml::from_str(&stdout(
        Command::new(BIN)
            .env_clear()
            .arg("check-config")
            .arg("--config")
            .arg(&path),
    ))
    .unwrap();
    let server = &effective["server"];
    assert_eq!(server["listen"].as_str(), Some("0.0.0.0:8080"));
    assert_eq!(server["watch_config"].as_bool(), Some(true));
    let drain = server["drain_ms"].as_integer().unwrap();
    let grace = server["shutdown_grace_ms"].as_integer().unwrap();
    assert!(drain > 0, "{map}: drains before shutdown");
    let period = pod["terminationGracePeriodSeconds"].as_i64().unwrap();
    assert!(
        period * 1000 > drain + grace,
        "{deployment}: {period} s covers the drain ({drain} ms) and the grace ({grace} ms)"
    );
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
}

#[test]
fn the_manifests_match_the_schemas_and_embed_configurations_check_config_accepts() {
    let bin = venv_bin();
    let files = [
        "deploy/kubernetes/wiregate.yaml",
        "deploy/kubernetes/replicas.yaml",
    ];
    for file in files {
        run(Command::new(bin.join("kubernetes-validate"))
            .args(["--strict", "--quiet", "--kubernetes-version", KUBERNETES])
            .arg(repo().join(file)));
    }
    let python = bin.join("python");

    let single = documents(&python, files[0]);
    assert_eq!(
        kinds(&single),
        ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]
    );
    check_gateway(&single, "wiregate");

    let replicas = documents(&python, files[1]);
    assert_eq!(
        kinds(&replicas),
        [
            "ConfigMap",
            "Deployment",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "Service"
        ]
    );
    check_gateway(&replicas, "wiregate-replicas");
    let redis = replicas
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "wiregate-redis")
        .expect("a Redis Deployment");
    assert!(redis["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .contains("redis"));
    let map = replicas.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    let text = map["data"]["gateway.toml"].as_str().unwrap();
    assert!(
        text.contains("redis = \"redis://wiregate-redis:6379/0\""),
        "{text}"
    );
}

/// The validator fails on what the API server would refuse: the test would catch a typo.
#[test]
fn the_validator_refuses_an_unknown_field() {
    let bin = venv_bin();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/wiregate.yaml"))
        .unwrap()
        .replace("periodSeconds: 10", "periodSecond: 10");
    std::fs::write(&bad, text).unwrap();
    let out = Command::new(bin.join("kubernetes-validate"))
        .args(["--strict", "--quiet", "--kubernetes-version", KUBERNETES])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("periodSecond"), "{said}");
}
