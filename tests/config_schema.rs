//! The configuration's reference and schema are generated from the structs that load the file
//! (`wiregate config reference`, `wiregate config schema`), committed in `docs/`, and every
//! configuration the project ships or documents validates against the schema; every gateway
//! the tests start is checked too (`support::schema`).

mod support;

use std::process::Command;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_wiregate");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{rel}")).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

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
            if !reference.contains(&format!("| {path} |")) && !reference.contains(&table) {
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

/// Every ```toml block of README and the guides: accepted by the schema, and by the loader
/// (what `check-config` runs) when the block is a whole configuration (it has `[[upstreams]]`
/// or `[[routes]]`, so its references resolve).
#[test]
fn every_toml_block_of_the_readme_and_guides_validates() {
    let mut files = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(format!("{ROOT}/docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    let pki = support::pki::Pki::new("docs");
    let mut checked = 0;
    for file in &files {
        for (line, block) in toml_blocks(&read(file)) {
            let value: Value =
                toml::from_str(&block).unwrap_or_else(|e| panic!("{file}:{line}: not TOML: {e}"));
            let problems = support::schema::problems(&value);
            assert!(problems.is_empty(), "{file}:{line}: {problems:?}");
            if block.contains("[[upstreams]]") {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("gateway.toml");
                std::fs::write(&path, with_real_pem_files(&block, &pki)).unwrap();
                if let Err(e) = wiregate::config::Config::load(&path, true) {
                    panic!("{file}:{line}: check-config refuses it: {e}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} blocks found");
}

/// `block` with each PEM file it names under `/etc/wiregate/` made real (a certificate, its key
/// or the CA that signed it, by the file's name), so the loader reads them as it would in place.
fn with_real_pem_files(block: &str, pki: &support::pki::Pki) -> String {
    let issued = pki.issue("docs", &["localhost"]);
    let (cert, key) = issued.paths();
    let mut out = String::new();
    let mut rest = block;
    while let Some(at) = rest.find("\"/etc/wiregate/") {
        let end = at + 1 + rest[at + 1..].find('"').expect("closing quote");
        let name = &rest[at + 1..end];
        let real = match name {
            n if n.ends_with(".key") || n.contains("privkey") => key.clone(),
            n if n.contains("ca") => pki.ca_file(),
            _ => cert.clone(),
        };
        out.push_str(&rest[..at + 1]);
        out.push_str(&real);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The fenced ```toml blocks of a Markdown text, each with the line it starts on.
fn toml_blocks(md: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in md.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => current = Some((i + 1, String::new())),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some((_, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
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
