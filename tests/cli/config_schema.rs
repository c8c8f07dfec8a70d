//! The configuration's reference and schema are generated from the structs that load the file
//! (`wiregate config reference`, `wiregate config schema`), committed in `docs/`, and every
//! configuration the project ships or documents validates against the schema; every gateway
//! the tests start is checked too (`support::schema`); the blocks of README and the guides are
//! checked in `docs`.

use std::process::Command;

use serde_json::{json, Value};

use crate::support;
use crate::{read, BIN};

/// What `wiregate config <what>` prints.
fn config_doc(what: &str) -> String {
    let out = Command::new(BIN)
        .args(["config", what])
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn docs_configuration_md_is_the_generated_reference() {
    let generated = config_doc("reference");
    assert!(
        read("docs/configuration.md") == generated,
        "docs/configuration.md differs from `wiregate config reference`; regenerate it with\n  \
         cargo run -- config reference > docs/configuration.md"
    );
}

#[test]
fn docs_gateway_schema_json_is_the_generated_schema() {
    let generated = config_doc("schema");
    assert!(
        read("docs/gateway.schema.json") == generated,
        "docs/gateway.schema.json differs from `wiregate config schema`; regenerate it with\n  \
         cargo run -- config schema > docs/gateway.schema.json"
    );
}

#[test]
fn the_schema_is_draft_2020_12_and_valid_under_its_meta_schema() {
    let schema: Value = serde_json::from_str(&config_doc("schema")).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    jsonschema::meta::validate(&schema).expect("valid under the 2020-12 meta-schema");
}

#[test]
fn the_reference_names_every_key_the_default_configuration_has() {
    let reference = config_doc("reference");
    let defaults = serde_json::to_value(wiregate::config::Config::default()).unwrap();
    let mut missing = Vec::new();
    for (section, body) in defaults.as_object().unwrap() {
        for key in body
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_else(Vec::new)
        {
            let path = format!("`{section}.{key}`");
            let table = format!("## `{section}.{key}`");
            let array = format!("## `{section}.{key}[]`");
            let named = [format!("| {path} |"), table, array];
            if !named.iter().any(|n| reference.contains(n.as_str())) {
                missing.push(path);
            }
        }
    }
    assert!(missing.is_empty(), "not in the reference: {missing:?}");
    // Restart-only keys are told apart from those a reload applies.
    assert!(reference.contains("| `server.listen` | string | \"127.0.0.1:8080\" | restart |"));
    assert!(reference.contains("| `server.max_body_bytes` | integer ≥ 0 | 1048576 | applied |"));
}

#[test]
fn the_shipped_gateway_toml_names_its_schema_and_validates() {
    let text = read("gateway.toml");
    assert_eq!(
        text.lines().next(),
        Some("#:schema ./docs/gateway.schema.json")
    );
    support::schema::check_toml(&text);
}

#[test]
fn an_unknown_key_is_refused_by_the_schema_and_by_the_loader() {
    let config = json!({"server": {"listen": "127.0.0.1:8080", "max_body_byte": 10}});
    let problems = support::schema::problems(&config);
    assert!(
        problems.iter().any(|p| p.contains("max_body_byte")),
        "{problems:?}"
    );
    let top = support::schema::problems(&json!({"serverr": {}}));
    assert!(top.iter().any(|p| p.contains("serverr")), "{top:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, "[server]\nmax_body_byte = 10\n").unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg("--config")
        .arg(&path)
        .env_clear()
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_body_byte"));
}

#[test]
fn a_wrong_type_or_value_is_refused_by_the_schema() {
    for bad in [
        json!({"server": {"max_body_bytes": "big"}}),
        json!({"server": {"max_body_bytes": -1}}),
        json!({"upstreams": [{"name": "a", "url": "http://h/", "dialect": "soap"}]}),
        json!({"upstreams": [{"name": "a", "dialect": "legacy"}]}),
        json!({"log": {"format": "xml"}}),
    ] {
        assert!(
            !support::schema::problems(&bad).is_empty(),
            "accepted {bad}"
        );
    }
}
