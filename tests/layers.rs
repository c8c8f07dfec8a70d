//! The crate's layers: every top-level module of `src/` sits in one layer, and a module uses
//! only modules of its own layer or of the layers before it, with no circle between two
//! modules. Reads every `src/**/*.rs`, maps each `crate::…` path in code (comments are not
//! code) to the module it names, and fails naming the file, the line and the import that points
//! later in the order, the modules of a circle, or a module no layer holds. Inside each folder
//! the files are held to the same rule: no circle between siblings.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, first to last, with the folders of `src/` each holds (what each owns:
/// docs/architecture.md). Folders of one layer may use one another, but never in a circle.
const LAYERS: &[(&str, &[&str])] = &[
    ("util", &["util"]),
    ("wire", &["wire"]),
    ("model", &["model"]),
    ("http", &["http"]),
    ("config", &["config"]),
    ("outbound", &["outbound"]),
    ("telemetry", &["telemetry"]),
    ("upstream", &["upstream"]),
    ("io", &["cluster", "events", "passthrough"]),
    ("auth", &["auth"]),
    ("sid", &["sid"]),
    ("a2a", &["a2a"]),
    ("migration", &["migration"]),
    ("gateway", &["gateway"]),
    ("server", &["console", "server"]),
    ("cli", &["demo", "main", "lib"]),
];

/// One import of one module by another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    from: String,
    to: String,
    at: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file under `src` belongs to (`server/h1/mod.rs` → `server`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.strip_suffix(".rs").unwrap_or(&first).to_owned()
}

/// The code of a line: without a `//` comment (doc comments included), outside strings.
fn code_of(line: &str) -> &str {
    let mut in_str = false;
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The modules a line of code names: `crate::x…` and the members of `crate::{x, y::…}`.
fn named(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        if before_ok {
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for member in group[..end].split(',') {
                    let m: String = member
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !m.is_empty() && m != "self" {
                        out.push(m);
                    }
                }
            } else {
                let m: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !m.is_empty() {
                    out.push(m);
                }
            }
        }
        rest = after;
    }
    out
}

/// Every import between two top-level modules of the tree at `src`.
fn imports(src: &Path) -> (BTreeSet<String>, Vec<Import>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut modules = BTreeSet::new();
    let mut found = Vec::new();
    for f in &files {
        let from = module_of(src, f);
        modules.insert(from.clone());
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for to in named(code_of(line)) {
                if to != from {
                    found.push(Import {
                        from: from.clone(),
                        to,
                        at: format!("{}:{}: {}", f.display(), n + 1, line.trim()),
                    });
                }
            }
        }
    }
    (modules, found)
}

/// What is wrong with the tree at `src` against `layers`, one line each.
fn problems(src: &Path, layers: &[(&str, &[&str])]) -> Vec<String> {
    let rank: BTreeMap<&str, (usize, &str)> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (layer, mods))| mods.iter().map(move |m| (*m, (i, *layer))))
        .collect();
    let (modules, found) = imports(src);
    let mut out = Vec::new();
    for m in &modules {
        if !rank.contains_key(m.as_str()) {
            out.push(format!("module {m} is in no layer: add it to LAYERS"));
        }
    }
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for imp in &found {
        let (Some(&(from, fl)), Some(&(to, tl))) =
            (rank.get(imp.from.as_str()), rank.get(imp.to.as_str()))
        else {
            continue;
        };
        if to > from {
            out.push(format!(
                "{} ({fl}) uses {} ({tl}), a later layer: {}",
                imp.from, imp.to, imp.at
            ));
        }
        edges
            .entry(imp.from.as_str())
            .or_default()
            .insert(imp.to.as_str());
    }
    for (a, tos) in &edges {
        for b in tos {
            if a < b && edges.get(b).is_some_and(|t| t.contains(a)) {
                let at = |x: &str, y: &str| {
                    found
                        .iter()
                        .find(|i| i.from == x && i.to == y)
                        .map(|i| i.at.clone())
                        .unwrap_or_default()
                };
                out.push(format!(
                    "circle between {a} and {b}: {} / {}",
                    at(a, b),
                    at(b, a)
                ));
            }
        }
    }
    // Longer circles within one layer (between layers, an upward import already shows).
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        while let Some((at, path)) = stack.pop() {
            for &next in edges.get(at).into_iter().flatten() {
                if next == *start && path.len() > 2 && path.iter().min() == Some(start) {
                    out.push(format!("circle {} -> {start}", path.join(" -> ")));
                } else if seen.insert(next) && rank.get(next) == rank.get(start) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    out
}

#[test]
fn every_module_uses_only_its_layer_and_the_ones_before() {
    // WIREGATE_LAYERS_SRC: check another tree (an older checkout's `src`, say).
    let src = std::env::var_os("WIREGATE_LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = problems(&src, LAYERS);
    assert!(
        found.is_empty(),
        "{} layer problems:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// docs/architecture.md's table names each layer's folders as [`LAYERS`] does, in its order.
#[test]
fn the_architecture_page_lists_the_layers_as_the_table() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let rows: Vec<&str> = page
        .lines()
        .filter(|l| {
            l.starts_with("| ")
                && l.split('|')
                    .nth(1)
                    .is_some_and(|c| c.trim().parse::<usize>().is_ok())
        })
        .collect();
    assert_eq!(
        rows.len(),
        LAYERS.len(),
        "one row a layer:\n{}",
        rows.join("\n")
    );
    for (i, ((layer, folders), row)) in LAYERS.iter().zip(&rows).enumerate() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[1], (i + 1).to_string(), "{row}");
        assert_eq!(cells[2], *layer, "{row}");
        for f in *folders {
            let named = if ["main", "lib"].contains(f) {
                format!("`{f}.rs`")
            } else {
                format!("`{f}/`")
            };
            assert!(
                cells[3].contains(&named) || *f == "lib",
                "layer {layer}: the page does not name {named}: {row}"
            );
        }
    }
}

/// docs/architecture.md names every file of `src/` (a folder's `mod.rs` by its folder's row).
#[test]
fn the_architecture_page_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let missing: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .filter(|rel| rel.contains('/') && !rel.ends_with("/mod.rs"))
        .filter(|rel| !page.contains(&format!("`src/{rel}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name: {missing:?}"
    );
}

/// The check itself, on a small tree made here: an upward import, a circle, a module in no
/// layer, and what must not count (a comment, a string, a path that only ends in `crate::`).
#[test]
fn the_check_finds_upward_imports_circles_and_unplaced_modules() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("low")).unwrap();
    std::fs::write(
        src.join("low/mod.rs"),
        "use crate::high::Thing;\n// crate::other is a comment\nfn f() { let _ = \"crate::other\"; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("high.rs"),
        "use crate::{low, peer::X};\nfn g() { mycrate::other(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("peer.rs"), "use crate::high;\n").unwrap();
    std::fs::write(src.join("stray.rs"), "").unwrap();
    let layers: &[(&str, &[&str])] = &[("first", &["low"]), ("second", &["high", "peer"])];
    let found = problems(src, layers);
    let has = |s: &str| found.iter().any(|p| p.contains(s));
    assert!(has("low (first) uses high (second)"), "{found:#?}");
    assert!(has("low/mod.rs:1"), "names file and line: {found:#?}");
    assert!(has("circle between high and low"), "{found:#?}");
    assert!(has("circle between high and peer"), "{found:#?}");
    assert!(has("module stray is in no layer"), "{found:#?}");
    assert!(
        !has("other"),
        "comments, strings and other crates: {found:#?}"
    );
    assert_eq!(found.len(), 4, "{found:#?}");
}

/// Code of a file without comments and without `#[cfg(test)]` modules: a test module may reach
/// any sibling, and a comment names what it likes.
fn code_without_tests(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut depth_skip: Option<usize> = None;
    let mut depth = 0usize;
    let mut pending_test = false;
    let mut in_block = false;
    for line in text.lines() {
        let mut line = line.to_owned();
        if in_block {
            match line.find("*/") {
                Some(i) => {
                    line = line[i + 2..].to_owned();
                    in_block = false;
                }
                None => continue,
            }
        }
        if let Some(i) = code_of(&line).find("/*") {
            in_block = !line[i..].contains("*/");
            line.truncate(i);
        }
        let line = code_of(&line).to_owned();
        let opens = line.matches('{').count();
        let closes = line.matches('}').count();
        if line.trim() == "#[cfg(test)]" {
            pending_test = true;
            continue;
        }
        if pending_test && depth_skip.is_none() && line.contains("mod ") && opens > 0 {
            depth_skip = Some(depth);
        }
        pending_test = false;
        depth = (depth + opens).saturating_sub(closes);
        if let Some(at) = depth_skip {
            if depth <= at {
                depth_skip = None;
            }
            continue;
        }
        code.push_str(&line);
        code.push('\n');
    }
    code
}

/// The names a piece of code imports through `prefix::name` and `prefix::{a, b::c, d}` (the
/// group's top level only).
fn names_under(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let pat = format!("{prefix}::");
    let mut rest = code;
    while let Some(i) = rest.find(&pat) {
        let before_ok = i == 0 || {
            let b = rest.as_bytes()[i - 1];
            !(b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        };
        let after = &rest[i + pat.len()..];
        if before_ok {
            if let Some(group) = after.strip_prefix('{') {
                let (mut depth, mut item) = (0usize, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.insert(ident(&item));
                            item.clear();
                        }
                        _ if depth == 0 => item.push(c),
                        _ => {}
                    }
                }
                out.insert(ident(&item));
            } else {
                out.insert(ident(after));
            }
        }
        rest = after;
    }
    out.remove("");
    out
}

/// Circles between the files of one folder: in each folder of the tree at `src`, its children
/// (`<name>.rs`, or `<name>/` with everything in it; `mod.rs` left out, a parent names its
/// children) and which of them names which, through `super::<name>` (from a child's own file)
/// or `crate::<folder>::<name>`. One line a circle, naming its members and their imports.
fn file_circles(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let mut kids: BTreeMap<String, PathBuf> = BTreeMap::new();
        for e in std::fs::read_dir(&folder).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                folders.push(p.clone());
                kids.insert(name, p);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                if !["mod", "lib", "main"].contains(&stem) {
                    kids.insert(stem.to_owned(), p);
                }
            }
        }
        let rel = folder.strip_prefix(src).unwrap();
        let crate_path: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (kid, path) in &kids {
            let mut files = Vec::new();
            if path.is_dir() {
                rust_files(path, &mut files);
            } else {
                files.push(path.clone());
            }
            let to = edges.entry(kid.as_str()).or_default();
            for f in files {
                let code = code_without_tests(&std::fs::read_to_string(&f).unwrap());
                let parent = f.parent().unwrap();
                let direct = parent == folder
                    || (f.ends_with("mod.rs") && parent.parent() == Some(folder.as_path()));
                let mut names = BTreeSet::new();
                if !crate_path.is_empty() {
                    names.extend(names_under(
                        &code,
                        &format!("crate::{}", crate_path.join("::")),
                    ));
                }
                if direct {
                    names.extend(names_under(&code, "super"));
                }
                to.extend(
                    names
                        .into_iter()
                        .filter(|n| n != kid && kids.contains_key(n)),
                );
            }
        }
        // A circle: the siblings each reaches that also reach it back (small folders: a walk
        // from every child is enough).
        let reach = |from: &str| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.to_owned()];
            while let Some(at) = stack.pop() {
                for n in edges.get(at.as_str()).into_iter().flatten() {
                    if seen.insert(n.clone()) {
                        stack.push(n.clone());
                    }
                }
            }
            seen
        };
        let reached: BTreeMap<&str, BTreeSet<String>> =
            kids.keys().map(|k| (k.as_str(), reach(k))).collect();
        let mut reported = BTreeSet::new();
        for (k, r) in &reached {
            if !r.contains(*k) || reported.contains(*k) {
                continue;
            }
            let circle: Vec<&str> = reached
                .iter()
                .filter(|(o, ro)| r.contains(**o) && ro.contains(*k))
                .map(|(o, _)| *o)
                .collect();
            let inner: Vec<String> = circle
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| circle.contains(&b.as_str()))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            reported.extend(circle.iter().map(|s| s.to_string()));
            out.push(format!(
                "circle in src/{}: {} ({})",
                rel.display(),
                circle.join(", "),
                inner.join(", ")
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn no_circle_between_the_files_of_a_folder() {
    let src = std::env::var_os("WIREGATE_LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = file_circles(&src);
    assert!(
        found.is_empty(),
        "{} file circles:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The file check itself, on a small tree made here: a circle through `super::`, one through a
/// `crate::` group three files long, and what must not count (a comment, a test module, a
/// path into a sibling that does not come back).
#[test]
fn the_file_check_finds_circles_inside_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("room/deep")).unwrap();
    let put = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    put(
        "room/mod.rs",
        "mod a; mod b; mod c; mod d; mod e; mod deep;\n",
    );
    put("room/a.rs", "use super::b::Thing;\n");
    put("room/b.rs", "use super::{a, c::{X, Y}};\n");
    put("room/c.rs", "use crate::room::{e::{f, g}, d::Z};\n");
    put("room/d.rs", "// super::c is a comment\n/* super::c */\n#[cfg(test)]\nmod tests {\n    use super::super::c;\n    fn t() { let _ = super::c::X; }\n}\npub struct Z;\n");
    put("room/e.rs", "pub fn f() { crate::room::deep::g(); }\n");
    put("room/deep/mod.rs", "pub fn g() { super::c::X; }\n");
    let found = file_circles(src);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("src/room: a, b "), "{found:#?}");
    assert!(found[1].contains("src/room: c, deep, e "), "{found:#?}");
    assert!(
        !found.concat().contains("d ->"),
        "comments and tests: {found:#?}"
    );
}
