//! An `[auth.api_keys]` file made by the test: each key's SHA-256 digest under its id.

/// The hex SHA-256 of `key`, as the keys file holds it.
pub fn digest(key: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, key.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a keys file to `path`: each `(id, key)` with `scopes`; returns the path as text.
pub fn write_api_keys(path: &std::path::Path, keys: &[(&str, &str)], scopes: &[&str]) -> String {
    let text: String = keys
        .iter()
        .map(|(id, key)| {
            format!(
                "[[keys]]\nid = \"{id}\"\nsha256 = \"{}\"\nscopes = {scopes:?}\n",
                digest(key)
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Two callers' API keys (header and key), for tests of one caller against another.
pub const ALICE: (&str, &str) = ("x-api-key", "alice-key-0001");
/// The second caller.
pub const BOB: (&str, &str) = ("x-api-key", "bob-key-0002");

/// `[auth]` required, naming [`ALICE`] and [`BOB`] by their keys from a file in `dir`.
pub fn alice_and_bob(dir: &std::path::Path) -> impl FnOnce(&mut wiregate::config::Config) {
    let path = write_api_keys(
        &dir.join("keys.toml"),
        &[("alice", ALICE.1), ("bob", BOB.1)],
        &[],
    );
    move |c| {
        c.auth.mode = wiregate::config::AuthMode::Required;
        c.auth.api_keys.file = path;
    }
}
