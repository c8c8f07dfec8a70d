//! Comments that stay true: every repository file a comment names exists, and no comment quotes
//! an instruction count (those figures live in docs/performance.md, with their commit, where a
//! later build cannot make them wrong unnoticed).
//!
//! Reads the comments of every `.rs` file under `src/`, `benches/`, `examples/` and `tests/`, of
//! the bench scripts (`benches/*.sh`) and of `Cargo.toml`. A path that starts at a top folder
//! (`src/…`, `tests/…`, `benches/…`, `docs/…`, `examples/…`, `fuzz/…`) must name a file or a
//! folder of the repository (an example by its name, `examples/legacy_upstream`, counts); a
//! module-relative one (`server/conn_service.rs`, `h1/answer.rs`, `answer.rs`) must be the end of some
//! file's path; a root document (`README.md`) must exist. Paths with a placeholder (`<target>`,
//! `*`, `{a,b}`) and addresses (`https://…`) are left alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top folders a path in a comment may start at.
const ROOTS: &[&str] = &["src/", "tests/", "benches/", "docs/", "examples/", "fuzz/"];

/// One comment's text and where it is.
struct Comment {
    file: String,
    line: usize,
    text: String,
}

/// The comments of Rust source `code`, each with the line it starts on: line comments (doc
/// comments included) and block comments, with strings, raw strings and character literals
/// skipped so that a `//` inside a literal is not taken for a comment.
fn rust_comments(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = code[i..].find('\n').map_or(b.len(), |n| i + n);
                out.push((line, code[i..end].to_owned()));
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (start, mut depth) = (line, 0usize);
                let from = i;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(b[i] == b'\n');
                        i += 1;
                    }
                }
                out.push((start, code[from..i].to_owned()));
            }
            b'r' if raw_string_hashes(&b[i..]).is_some() && starts_token(&b[..i]) => {
                let hashes = raw_string_hashes(&b[i..]).unwrap_or(0);
                i += 2 + hashes;
                let mut close = vec![b'#'; hashes + 1];
                close[0] = b'"';
                while i < b.len() && !b[i..].starts_with(&close) {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
                i += close.len();
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    line += usize::from(b.get(i) == Some(&b'\n'));
                    i += 1;
                }
                i += 1;
            }
            // A character literal ('"', '\'', '…'); a lifetime ('a) is code.
            b'\'' => {
                let width = code[i + 1..].chars().next().map_or(0, char::len_utf8);
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if b.get(i + 1 + width) == Some(&b'\'') {
                    i += 2 + width;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether a literal's prefix starts after `before`: not inside an identifier, or right after a
/// byte string's `b` (`br"…"`).
fn starts_token(before: &[u8]) -> bool {
    let ident = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    match before.split_last() {
        Some((b'b', rest)) => !ident(rest.last()),
        _ => !ident(before.last()),
    }
}

/// The `#`s of a raw string opening at the start of `b` (`r"`, `r#"`, …).
fn raw_string_hashes(b: &[u8]) -> Option<usize> {
    let hashes = b.iter().skip(1).take_while(|c| **c == b'#').count();
    (b.first() == Some(&b'r') && b.get(1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// The comments of a TOML file or a shell script: from a `#` outside quotes to the line's end
/// (a script's `#!` line is none).
fn hash_comments(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, l) in text.lines().enumerate() {
        if l.starts_with("#!") {
            continue;
        }
        let (mut single, mut double) = (false, false);
        for (i, c) in l.char_indices() {
            match c {
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '#' if !single && !double && (i == 0 || l[..i].ends_with([' ', '\t'])) => {
                    out.push((n + 1, l[i..].to_owned()));
                    break;
                }
                _ => {}
            }
        }
    }
    out
}

/// The words of a comment that may be paths: runs of the characters a path is written with,
/// without the punctuation that ends a sentence or closes a parenthesis.
fn path_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-<>{}*$…#".contains(c)))
        .map(|w| w.trim_end_matches(['.', ',', ';', ':']))
        .filter(|w| !w.is_empty())
}

/// What a comment's path must be, if the word is one: `Some(word)` for a path that names a
/// repository file or folder.
fn cited_path(word: &str) -> Option<&str> {
    if word.starts_with('/') || word.contains(['<', '>', '{', '}', '*', '$', '…']) {
        return None;
    }
    let word = word.split('#').next().unwrap_or(word);
    let rooted = ROOTS.iter().any(|r| word.starts_with(r));
    let relative = word.ends_with(".rs")
        && word.trim_end_matches(".rs").split('/').all(|part| {
            !part.is_empty() && part.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        });
    let root_doc = word.ends_with(".md")
        && !word.contains('/')
        && word
            .trim_end_matches(".md")
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c == b'_');
    (rooted || relative || root_doc).then_some(word)
}

/// The repository's files and folders, as paths relative to its root with `/` between parts.
struct Tree {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
}

impl Tree {
    /// The files under the folders a comment may cite (`target/` left out), and those at the root.
    fn read(root: &Path) -> Tree {
        let mut tree = Tree {
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
        };
        for top in [
            "src",
            "tests",
            "benches",
            "docs",
            "examples",
            "fuzz",
            "deploy",
            "packaging",
        ] {
            tree.walk(root, &root.join(top));
        }
        for e in std::fs::read_dir(root).unwrap().flatten() {
            if e.path().is_file() {
                tree.files
                    .insert(e.file_name().to_string_lossy().into_owned());
            }
        }
        tree
    }

    fn walk(&mut self, root: &Path, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let rel = |p: &Path| {
            let r = p.strip_prefix(root).unwrap().to_string_lossy();
            r.replace(std::path::MAIN_SEPARATOR, "/")
        };
        self.dirs.insert(rel(dir));
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if e.file_name() != "target" {
                    self.walk(root, &p);
                }
            } else {
                self.files.insert(rel(&p));
            }
        }
    }

    /// Whether `path`, as a comment cites it, names something in the repository.
    fn holds(&self, path: &str) -> bool {
        if ROOTS.iter().any(|r| path.starts_with(r)) {
            let bare = path.trim_end_matches('/');
            self.files.contains(bare)
                || self.dirs.contains(bare)
                || self.files.contains(&format!("{bare}.rs"))
        } else {
            let tail = format!("/{path}");
            self.files.iter().any(|f| f == path || f.ends_with(&tail))
        }
    }
}

/// Whether `text` quotes an instruction count: the word for them right after a number (which
/// may carry `k` or `M`) or a number word (hundreds, thousands), or after such a number and "of";
/// or a number of thousands right before "per", "a call" or "of" (the self-test below lists
/// what it catches).
fn quotes_instruction_count(text: &str) -> bool {
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() || "(),;:`".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let number = |w: &str| {
        let w = w.trim_end_matches(['k', 'm']);
        !w.is_empty()
            && w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
    };
    let unit = |w: &str| matches!(w, "k" | "m");
    let number_word = |w: &str| {
        matches!(
            w,
            "hundred" | "hundreds" | "thousand" | "thousands" | "million" | "millions"
        )
    };
    let thousands = |i: usize| {
        let w = &words[i];
        (number(w) && w.ends_with('k')) || (number(w) && words.get(i + 1).is_some_and(|u| u == "k"))
    };
    words.iter().enumerate().any(|(i, w)| {
        let w = w.trim_end_matches('.');
        if w == "instructions" || w == "instruction" {
            let mut j = i;
            if j > 0 && (unit(&words[j - 1]) || words[j - 1] == "of") {
                j -= 1;
            }
            return j > 0 && (number(&words[j - 1]) || number_word(&words[j - 1]));
        }
        if thousands(i) {
            let after = words[i + usize::from(!words[i].ends_with('k'))..]
                .iter()
                .skip(1)
                .take(2)
                .map(String::as_str)
                .collect::<Vec<_>>();
            return matches!(
                after.as_slice(),
                ["per", ..] | ["a", "call" | "call."] | ["of", ..]
            );
        }
        false
    })
}

/// The comments of every file the check reads, under `root`.
fn comments(root: &Path) -> Vec<Comment> {
    let mut files = Vec::new();
    for top in ["src", "benches", "examples", "tests"] {
        source_files(&root.join(top), &mut files);
    }
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let found = if name.ends_with(".rs") {
            rust_comments(&text)
        } else {
            hash_comments(&text)
        };
        out.extend(found.into_iter().map(|(line, text)| Comment {
            file: name.clone(),
            line,
            text,
        }));
    }
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    out.extend(
        hash_comments(&cargo)
            .into_iter()
            .map(|(line, text)| Comment {
                file: "Cargo.toml".to_owned(),
                line,
                text,
            }),
    );
    out
}

/// Rust sources under `dir`, and scripts (`.sh`) beside them.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if e.file_name() != "target" {
                source_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs" || x == "sh") {
            out.push(p);
        }
    }
}

/// What is wrong with `comments` against `tree`: one line per missing path or quoted count.
fn findings(comments: &[Comment], tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for c in comments {
        for word in path_words(&c.text) {
            if let Some(path) = cited_path(word) {
                if !tree.holds(path) {
                    out.push(format!("{}:{}: `{path}` does not exist", c.file, c.line));
                }
            }
        }
        if quotes_instruction_count(&c.text) {
            out.push(format!(
                "{}:{}: quotes an instruction count (it belongs in docs/performance.md): {}",
                c.file,
                c.line,
                c.text.trim()
            ));
        }
    }
    out
}

#[test]
fn comments_name_existing_files_and_quote_no_instruction_counts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = Tree::read(root);
    let comments = comments(root);
    assert!(
        comments.len() > 1000,
        "too few comments read: {}",
        comments.len()
    );
    let found = findings(&comments, &tree);
    assert!(found.is_empty(), "comments to mend:\n{}", found.join("\n"));
}

/// The checker on made-up text, so that the test above cannot pass by reading nothing.
#[test]
fn the_checker_finds_what_it_looks_for() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = Tree::read(root);
    let code = r##"
//! Owns `src/server/conn_service.rs` and `server/conn_service.rs`; see `src/no/such_file.rs`.
/// Reads `h1/nothing_here.rs` and docs/performance.md, and NOWHERE.md.
fn f() {
    let s = "// src/not/a/comment.rs";
    let r = r#"a "quoted" // src/nor/this.rs"#;
    let c = '"'; // after a char: tests/missing_too.rs
    let l: &'static str = "x"; /* block: benches/gone.sh */
}
// Placeholders pass: tests/<name>.rs, src/**/*.rs; an address too: https://example.org/src/x.rs
"##;
    let comments: Vec<Comment> = rust_comments(code)
        .into_iter()
        .map(|(line, text)| Comment {
            file: "made_up.rs".to_owned(),
            line,
            text,
        })
        .collect();
    assert_eq!(
        comments.len(),
        5,
        "{:?}",
        comments.iter().map(|c| &c.text).collect::<Vec<_>>()
    );
    assert_eq!(
        findings(&comments, &tree),
        [
            "made_up.rs:2: `src/no/such_file.rs` does not exist",
            "made_up.rs:3: `h1/nothing_here.rs` does not exist",
            "made_up.rs:3: `NOWHERE.md` does not exist",
            "made_up.rs:7: `tests/missing_too.rs` does not exist",
            "made_up.rs:8: `benches/gone.sh` does not exist",
        ]
    );
    assert_eq!(
        hash_comments("a = \"#not\" # see src/gone.rs\n#!/bin/sh\n# x"),
        [(1, "# see src/gone.rs".to_owned()), (3, "# x".to_owned())]
    );

    for counted in [
        "(measured with callgrind: about 4k of 42k instructions per proxied call)",
        "cost 0.2 k instructions per proxied call",
        "made 22 363 instructions per proxied call",
        "about 700 instructions a call.",
        "costs about a\nthousand instructions per address",
        "hundreds of thousands of instructions",
        "`core::fmt` cost a proxied call about 0.3 k a call",
        "SipHash cost 0.6 k per call",
    ] {
        assert!(quotes_instruction_count(counted), "not caught: {counted}");
    }
    for fine in [
        "measured dearer per call (docs/performance.md)",
        "callgrind reads its instructions apart by the function it runs",
        "instructions per call = the difference of the totals",
        "at 1,000 events/s two events share a wake-up",
        "`k` keys, 64 KiB at most",
    ] {
        assert!(!quotes_instruction_count(fine), "wrongly caught: {fine}");
    }
}
