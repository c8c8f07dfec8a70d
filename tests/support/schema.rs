//! Every configuration a test starts a gateway with is checked against `wiregate config schema`
//! first: the schema must accept all that the loader accepts.

use std::sync::OnceLock;

use serde_json::Value;

/// The schema, compiled once per test binary.
fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        jsonschema::validator_for(&wiregate::config::reference::schema())
            .expect("wiregate config schema is a valid JSON Schema")
    })
}

/// The schema's complaints about `config` (a configuration as JSON), one per line; empty: none.
pub fn problems(config: &Value) -> Vec<String> {
    validator()
        .iter_errors(config)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

/// Panics, naming every problem, unless `config` validates.
pub fn check(config: &Value) {
    let problems = problems(config);
    assert!(
        problems.is_empty(),
        "refused by the schema:\n{}",
        problems.join("\n")
    );
}

/// [`check`] for a configuration file's text.
pub fn check_toml(text: &str) {
    let value: Value = toml::from_str(text).expect("TOML");
    check(&value);
}
