//! README's complete example of "Putting wiregate in front of an existing server" is a working
//! configuration: its TOML block, taken from README.md by the section's heading, passes the
//! binary's `check-config` with its certificate paths pointed at files made in the test; and so
//! does it with its commented TLS keys (mTLS both ways) turned on.

use crate::support::pki::Pki;
use crate::{check_config, effective};

const SECTION: &str = "## Putting wiregate in front of an existing server";

/// The first ```toml block of README's section `heading`.
fn toml_block(readme: &str, heading: &str) -> String {
    let start = readme
        .lines()
        .position(|l| l.trim_end() == heading)
        .unwrap_or_else(|| panic!("README has no section {heading:?}"));
    let mut lines = readme.lines().skip(start + 1);
    lines
        .by_ref()
        .take_while(|l| !l.starts_with("## "))
        .find(|l| l.trim_end() == "```toml")
        .unwrap_or_else(|| panic!("README's {heading:?} has no ```toml block"));
    lines
        .take_while(|l| l.trim_end() != "```")
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn the_readme_example_configuration_validates() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let example = toml_block(&readme, SECTION);
    assert!(
        example.contains("[server.tls]"),
        "the block found:\n{example}"
    );

    let pki = Pki::new("readme");
    let (cert, key) = pki.issue("gateway", &["legacy.example"]).paths();
    let (gw_cert, gw_key) = pki.issue("gw", &["gw"]).paths();
    let ca = pki.ca_file();
    let mut text = example.clone();
    for (file, made) in [
        ("/etc/wiregate/tls/fullchain.pem", &cert),
        ("/etc/wiregate/tls/privkey.pem", &key),
        ("/etc/wiregate/tls/clients-ca.pem", &ca),
        ("/etc/wiregate/legacy-ca.pem", &ca),
        ("/etc/wiregate/gw.pem", &gw_cert),
        ("/etc/wiregate/gw.key", &gw_key),
    ] {
        assert!(text.contains(file), "the example no longer names {file}");
        text = text.replace(file, made);
    }
    assert!(
        !text.contains("/etc/"),
        "a file of the example has no stand-in here:\n{text}"
    );

    let (ok, out, err) = check_config(Some(&text), &[]);
    assert!(ok, "README's example is refused:\n{err}\n{text}");
    let c = effective(&out);
    assert_eq!(
        c["server"]["rpc_paths"],
        toml::Value::from(vec!["/a2a", "/rpc"])
    );
    assert_eq!(c["server"]["tls"]["cert"].as_str(), Some(cert.as_str()));
    assert_eq!(c["passthrough"][0]["prefix"].as_str(), Some("/"));
    assert_eq!(
        c["upstreams"][0]["url"].as_str(),
        Some("https://legacy.internal/a2a")
    );

    // The commented TLS keys, turned on: a client CA on the listener, a CA file and a client
    // certificate to the upstream.
    let commented = ["client_ca", "ca_file", "client_cert", "client_key"];
    let mut all = text.clone();
    for k in commented {
        let line = format!("# {k} = ");
        assert!(all.contains(&line), "the example no longer shows {k}");
        all = all.replace(&line, &format!("{k} = "));
    }
    let (ok, out, err) = check_config(Some(&all), &[]);
    assert!(
        ok,
        "README's example with its TLS keys on is refused:\n{err}\n{all}"
    );
    let c = effective(&out);
    assert_eq!(c["server"]["tls"]["client_ca"].as_str(), Some(ca.as_str()));
    assert_eq!(
        c["upstreams"][0]["client_key"].as_str(),
        Some(gw_key.as_str())
    );
}
