//! README and the guides in `docs/` say what works; this checks they are right. Every ```toml
//! block validates against the schema, and a whole configuration (one with `[[upstreams]]`)
//! passes the binary's `check-config` with the PEM files it names made real. Every ```sh block
//! made only of commands the runner knows (curl against the gateway, `wiregate` subcommands that
//! only read) is run by bash against `wiregate --demo`, and must exit 0 with output; a block with
//! any other command (a build, a bench, a command that needs a file or a second machine) is left
//! out, and the test names it.

use std::process::Command;

use crate::support::pki::Pki;
use crate::support::schema;
use crate::{check_config, effective, read, start_demo, BIN};

/// README and every page of `docs/`.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned()];
    let dir = format!("{}/docs", env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of `lang` in a Markdown text, each with the line it starts on.
fn blocks(md: &str, lang: &str) -> Vec<(usize, String)> {
    let fence = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in md.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.trim_end() == fence => current = Some((i + 1, String::new())),
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

/// `block` with each PEM file it names under `/etc/wiregate/` made real (a certificate, its key
/// or the CA that signed it, by the file's name), so the loader reads them as it would in place.
fn with_real_pem_files(block: &str, pki: &Pki) -> String {
    let (cert, key) = pki.issue("docs", &["localhost"]).paths();
    let mut out = String::new();
    let mut rest = block;
    while let Some(at) = rest.find("\"/etc/wiregate/") {
        let end = at + 1 + rest[at + 1..].find('"').expect("closing quote");
        let real = match &rest[at + 1..end] {
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

#[test]
fn every_toml_block_validates_and_whole_configurations_pass_check_config() {
    let pki = Pki::new("docs");
    let (mut checked, mut whole) = (0, 0);
    for page in pages() {
        for (line, block) in blocks(&read(&page), "toml") {
            let value: serde_json::Value =
                toml::from_str(&block).unwrap_or_else(|e| panic!("{page}:{line}: not TOML: {e}"));
            let problems = schema::problems(&value);
            assert!(problems.is_empty(), "{page}:{line}: {problems:?}");
            checked += 1;
            if block.contains("[[upstreams]]") {
                let (ok, _, err) = check_config(Some(&with_real_pem_files(&block, &pki)), &[]);
                assert!(ok, "{page}:{line}: check-config refuses it:\n{err}");
                whole += 1;
            }
        }
    }
    assert!(
        checked >= 6 && whole >= 2,
        "{checked} blocks, {whole} whole"
    );
}

/// The fronting guide's configuration with its commented TLS keys turned on (a client CA on the
/// listener; a CA file and a client certificate to the upstream) loads too, as it says.
#[test]
fn the_fronting_example_loads_with_its_tls_keys_on() {
    let (_, block) = blocks(&read("docs/fronting.md"), "toml")
        .into_iter()
        .find(|(_, b)| b.contains("[server.tls]"))
        .expect("docs/fronting.md has a configuration with [server.tls]");
    let mut all = block.clone();
    for k in ["client_ca", "ca_file", "client_cert", "client_key"] {
        let line = format!("# {k} = ");
        assert!(all.contains(&line), "the example no longer shows {k}");
        all = all.replace(&line, &format!("{k} = "));
    }
    let pki = Pki::new("fronting");
    let text = with_real_pem_files(&all, &pki);
    let (ok, out, err) = check_config(Some(&text), &[]);
    assert!(ok, "refused with its TLS keys on:\n{err}\n{text}");
    let c = effective(&out);
    assert_eq!(
        c["server"]["rpc_paths"],
        toml::Value::from(vec!["/a2a", "/rpc"])
    );
    assert_eq!(
        c["server"]["tls"]["client_ca"].as_str(),
        Some(pki.ca_file().as_str())
    );
    assert!(c["upstreams"][0]["client_key"]
        .as_str()
        .is_some_and(|k| k.ends_with(".key")));
    assert_eq!(c["passthrough"][0]["prefix"].as_str(), Some("/"));
}

/// Why the runner leaves a command out, or `None` when it runs it.
fn left_out(command: &str) -> Option<&'static str> {
    let c = command.trim_start();
    let word = c.split_whitespace().next().unwrap_or("");
    let sub = c.split_whitespace().nth(1).unwrap_or("");
    match word {
        "" | "#" => None,
        "curl" => None,
        w if w.starts_with("ctx=$(curl") => None,
        "wiregate" | "./target/release/wiregate" => match sub {
            "check-config" | "config" | "migration" | "--version" | "--help" => None,
            "completions" if !c.contains('>') => None,
            _ => Some("a wiregate command that serves, reloads or writes files"),
        },
        "cargo" if c.starts_with("cargo run --release -- --demo") => {
            Some("the demo itself, which this test runs")
        }
        "cargo" => Some("a build, a test run or a bench"),
        _ => Some("a command the runner does not know"),
    }
}

/// A block's commands, `\`-continued lines joined.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.trim_end().strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn every_sh_block_the_runner_knows_runs_against_the_demo() {
    let (_guard, url, _context, _stderr) = start_demo(&[]);
    let addr = url.trim_start_matches("http://").to_owned();
    let bin_dir = std::path::Path::new(BIN).parent().unwrap().to_owned();
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for page in pages() {
        for (line, block) in blocks(&read(&page), "sh") {
            let reasons: Vec<&str> = commands(&block)
                .iter()
                .filter_map(|c| left_out(c))
                .collect();
            if let Some(reason) = reasons.first() {
                skipped.push(format!("{page}:{line} ({reason})"));
                continue;
            }
            let script = block
                .replace("127.0.0.1:8080", &addr)
                .replace("localhost:8080", &addr)
                .replace("cargo run --release --", "wiregate")
                .replace("./target/release/wiregate", "wiregate");
            // A stream is read for five seconds: curl's timeout (28) is how it ends here.
            let prelude = "set -eo pipefail\n\
                 curl() { command curl --max-time 5 \"$@\" || [ $? = 28 ]; }\n";
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new("bash")
                .arg("-c")
                .arg(format!("{prelude}{script}"))
                .env(
                    "PATH",
                    format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
                )
                .env("WIREGATE_SERVER__LISTEN", &addr)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && !stdout.trim().is_empty(),
                "{page}:{line} failed ({}):\n{script}\nstdout: {stdout}\nstderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            ran.push(format!("{page}:{line}"));
        }
    }
    eprintln!(
        "ran {} blocks: {ran:?}\nleft out {}: {skipped:?}",
        ran.len(),
        skipped.len()
    );
    for page in [
        "docs/fronting.md",
        "docs/sid-bridge.md",
        "docs/operations.md",
    ] {
        assert!(
            ran.iter().any(|r| r.starts_with(page)),
            "no block of {page} ran"
        );
    }
}
