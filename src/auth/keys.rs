//! API keys (`auth.api_keys.file`): a TOML file of
//! `[[keys]] id = "ci-bot", sha256 = "<64 hex digits>", scopes = ["plans:read"]`.
//!
//! The file holds only the SHA-256 digest of each key, so it gives no key away. A presented key
//! is hashed and compared with every entry's digest in constant time, so how long a lookup
//! takes says nothing of which entry, or how much of one, it matched.
//!
//! A key found so is kept in a bounded cache of verified keys ([`MAX_VERIFIED`], dropped with
//! the file's keys on reload), as the JWT cache keeps verified tokens: a client sending the
//! same key on every call pays a hash and a constant-time comparison, not a SHA-256 (measured
//! dearer: docs/performance.md). Only keys that matched an entry are kept, so a guess is never
//! in it.

use std::collections::HashMap;

use ring::digest::{digest, SHA256, SHA256_OUTPUT_LEN};
use serde::Deserialize;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use crate::auth::{Caller, Kind};
use crate::util::bounded::{Bounded, Evict};
use crate::util::hex;

/// The API keys of one file: each entry's digest and the caller it names.
pub(crate) struct ApiKeys {
    /// The digests, in the file's order; `callers[i]` is the caller of `digests[i]`.
    digests: Vec<[u8; SHA256_OUTPUT_LEN]>,
    callers: Vec<Caller>,
    verified: Verified,
}

/// Keys verified already at most.
const MAX_VERIFIED: usize = 1024;

/// Keys that matched an entry, by a seeded hash of the key: the key itself (compared in
/// constant time, so two keys of one hash only cost a miss) and its entry's index.
struct Verified(Bounded<(Box<[u8]>, usize)>);

/// No verified key is stale (the file's keys hold until a reload drops them all); a full
/// cache drops any eighth.
impl Evict for (Box<[u8]>, usize) {
    fn stale(&self, _: u64) -> bool {
        false
    }
    fn rank(&self) -> u64 {
        0
    }
}

impl Default for Verified {
    fn default() -> Self {
        Verified(Bounded::new(MAX_VERIFIED))
    }
}

impl Verified {
    fn get(&self, key: &[u8]) -> Option<usize> {
        self.0.peek(self.0.hash(key), |kept| {
            let (kept, i) = kept?;
            crate::util::secret::same(kept, key).then_some(*i)
        })
    }

    fn insert(&self, key: &[u8], i: usize) {
        self.0.insert(self.0.hash(key), 0, (key.into(), i));
    }
}

/// Names the callers only: even a digest of a guessable key is not for logs.
impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field(
                "ids",
                &self.callers.iter().map(|c| &*c.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The file's shape; each entry is read on its own so that its errors can name it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    keys: Vec<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    sha256: String,
    #[serde(default)]
    scopes: Vec<String>,
}

impl ApiKeys {
    /// Parses the file's text. An error names the entry and field it is about
    /// (`keys[2].sha256: not 64 hex digits`); entries count from 0.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let mut digests = Vec::with_capacity(file.keys.len());
        let mut callers = Vec::with_capacity(file.keys.len());
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut seen: HashMap<[u8; SHA256_OUTPUT_LEN], usize> = HashMap::new();
        for (i, value) in file.keys.into_iter().enumerate() {
            let entry: Entry = value
                .try_into()
                .map_err(|e: toml::de::Error| format!("keys[{i}]: {}", e.message().trim_end()))?;
            if entry.id.is_empty() {
                return Err(format!("keys[{i}].id: empty"));
            }
            if entry.id.chars().any(char::is_control) {
                return Err(format!(
                    "keys[{i}].id: {:?} has control characters",
                    entry.id
                ));
            }
            if let Some(j) = ids.get(&entry.id) {
                return Err(format!(
                    "keys[{i}].id: duplicate id {:?} (also keys[{j}])",
                    entry.id
                ));
            }
            let Some(d) = hex::decode::<SHA256_OUTPUT_LEN>(&entry.sha256, true) else {
                return Err(format!("keys[{i}].sha256: not 64 hex digits"));
            };
            if let Some(j) = seen.get(&d) {
                return Err(format!("keys[{i}].sha256: the same key as keys[{j}]"));
            }
            if let Some(k) = entry.scopes.iter().position(String::is_empty) {
                return Err(format!("keys[{i}].scopes[{k}]: empty"));
            }
            callers.push(Caller::new(Kind::ApiKey, &entry.id, entry.scopes));
            ids.insert(entry.id, i);
            seen.insert(d, i);
            digests.push(d);
        }
        Ok(ApiKeys {
            digests,
            callers,
            verified: Verified::default(),
        })
    }

    /// Reads and parses the file at `path`; the error starts with the path.
    pub(crate) fn load(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("{path}: {e}"))
    }

    /// The caller whose key `key` is: from the verified keys, or else by its digest (every
    /// entry's compared, in constant time and without stopping at a match).
    pub(crate) fn find(&self, key: &[u8]) -> Option<&Caller> {
        if let Some(i) = self.verified.get(key) {
            return self.callers.get(i);
        }
        let i = self.digest_match(key)?;
        self.verified.insert(key, i);
        self.callers.get(i)
    }

    /// The index of the entry whose digest is `key`'s: every digest compared, in constant
    /// time, without stopping at a match.
    fn digest_match(&self, key: &[u8]) -> Option<usize> {
        let presented = digest(&SHA256, key);
        let presented = presented.as_ref();
        let mut found = Choice::from(0);
        let mut index = 0u64;
        for (i, d) in self.digests.iter().enumerate() {
            let eq = d[..].ct_eq(presented);
            index.conditional_assign(&(i as u64), eq);
            found |= eq;
        }
        match bool::from(found) {
            true => usize::try_from(index).ok(),
            false => None,
        }
    }

    /// How many keys the file holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.digests.len()
    }
}

/// The key a request presents: the value of the configured key header (e.g. `x-api-key`) when
/// it has one, else that of `Authorization: ApiKey <key>` (the scheme matched regardless of case,
/// RFC 9110 § 11.1). Surrounding spaces are not part of a key; an empty one is none.
pub(crate) fn key_of<'a>(
    header_value: Option<&'a [u8]>,
    authorization: Option<&'a [u8]>,
) -> Option<&'a [u8]> {
    if let Some(key) = header_value
        .map(<[u8]>::trim_ascii)
        .filter(|k| !k.is_empty())
    {
        return Some(key);
    }
    crate::wire::authorization::token_of(authorization?, "apikey")
}

/// A TOML syntax or shape error on one line: `line 3, column 1: …`.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(key: &[u8]) -> String {
        crate::util::hex::encode(digest(&SHA256, key).as_ref())
    }

    fn file() -> String {
        format!(
            r#"
[[keys]]
id = "ci-bot"
sha256 = "{}"
scopes = ["plans:read", "plans:write"]

[[keys]]
id = "dashboard"
sha256 = "{}"
"#,
            hex(b"ci-secret-0123456789"),
            hex(b"dash-secret-abcdefgh").to_uppercase(),
        )
    }

    fn entry(id: &str, sha256: &str) -> String {
        format!("[[keys]]\nid = {id:?}\nsha256 = {sha256:?}\n")
    }

    #[test]
    fn parses_a_good_file() {
        let keys = ApiKeys::parse(&file()).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(
            format!("{keys:?}"),
            r#"ApiKeys { ids: ["ci-bot", "dashboard"] }"#
        );
        assert_eq!(ApiKeys::parse("").unwrap().len(), 0);
        assert_eq!(ApiKeys::parse("keys = []").unwrap().len(), 0);
    }

    #[test]
    fn finds_the_caller_of_a_key() {
        let keys = ApiKeys::parse(&file()).unwrap();
        let ci = keys.find(b"ci-secret-0123456789").unwrap();
        assert_eq!(
            *ci,
            Caller::new(
                Kind::ApiKey,
                "ci-bot",
                ["plans:read".to_owned(), "plans:write".to_owned()]
            )
        );
        assert!(ci.has_scope("plans:write"));
        let dash = keys.find(b"dash-secret-abcdefgh").unwrap();
        assert_eq!(*dash, Caller::new(Kind::ApiKey, "dashboard", []));
    }

    #[test]
    fn keeps_only_keys_that_matched_and_stays_bounded() {
        let keys = ApiKeys::parse(&file()).unwrap();
        let kept = |k: &ApiKeys| k.verified.0.len();
        assert_eq!(keys.find(b"wrong"), None);
        assert_eq!(kept(&keys), 0, "a guess is not kept");
        let first = keys.find(b"ci-secret-0123456789").cloned();
        assert_eq!(kept(&keys), 1);
        assert_eq!(keys.find(b"ci-secret-0123456789").cloned(), first);
        assert_eq!(keys.verified.get(b"ci-secret-012345678"), None);
        assert_eq!(keys.verified.get(b"ci-secret-0123456789X"), None);
        let v = Verified::default();
        for i in 0..MAX_VERIFIED + 10 {
            v.insert(format!("key-{i}").as_bytes(), i);
        }
        assert!(v.0.len() <= MAX_VERIFIED);
        assert_eq!(
            v.get(format!("key-{}", MAX_VERIFIED + 9).as_bytes()),
            Some(MAX_VERIFIED + 9)
        );
    }

    #[test]
    fn refuses_wrong_and_near_keys() {
        let keys = ApiKeys::parse(&file()).unwrap();
        assert_eq!(keys.find(b"wrong"), None);
        assert_eq!(keys.find(b""), None);
        // One byte off, at each end and in the middle; a prefix; one byte more.
        assert_eq!(keys.find(b"Ci-secret-0123456789"), None);
        assert_eq!(keys.find(b"ci-secret-0123456788"), None);
        assert_eq!(keys.find(b"ci-secret-0123X56789"), None);
        assert_eq!(keys.find(b"ci-secret-012345678"), None);
        assert_eq!(keys.find(b"ci-secret-01234567890"), None);
        // The digest itself is not a key.
        assert_eq!(keys.find(hex(b"ci-secret-0123456789").as_bytes()), None);
        assert_eq!(ApiKeys::parse("").unwrap().find(b"anything"), None);
    }

    #[test]
    fn errors_name_the_entry() {
        let good = hex(b"k");
        let other = hex(b"other");
        let cases = [
            (
                format!("{}{}", entry("a", &good), entry("b", &good[1..])),
                "keys[1].sha256: not 64 hex digits",
            ),
            (
                format!(
                    "{}{}{}",
                    entry("a", &good),
                    entry("b", &other),
                    entry("c", &format!("{}g", &good[1..]))
                ),
                "keys[2].sha256: not 64 hex digits",
            ),
            (
                entry("a", &format!("{good}00")),
                "keys[0].sha256: not 64 hex digits",
            ),
            (entry("", &good), "keys[0].id: empty"),
            (
                entry("a\nb", &good),
                r#"keys[0].id: "a\nb" has control characters"#,
            ),
            (
                format!("{}{}", entry("a", &good), entry("a", &other)),
                r#"keys[1].id: duplicate id "a" (also keys[0])"#,
            ),
            (
                format!("{}{}", entry("a", &good), entry("b", &good.to_uppercase())),
                "keys[1].sha256: the same key as keys[0]",
            ),
            (
                format!("{}scopes = [\"x\", \"\"]\n", entry("a", &good)),
                "keys[0].scopes[1]: empty",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(ApiKeys::parse(&text).err().as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn shape_errors_name_the_entry_or_line() {
        let good = hex(b"k");
        let unknown = format!(
            "{}{}key = \"plain\"\n",
            entry("a", &good),
            entry("b", &hex(b"x"))
        );
        let e = ApiKeys::parse(&unknown).unwrap_err();
        assert!(e.starts_with("keys[1]: unknown field `key`"), "{e}");
        let missing = format!("{}[[keys]]\nid = \"b\"\n", entry("a", &good));
        let e = ApiKeys::parse(&missing).unwrap_err();
        assert_eq!(e, "keys[1]: missing field `sha256`");
        let wrong_type = format!("{}scopes = \"plans:read\"\n", entry("a", &good));
        let e = ApiKeys::parse(&wrong_type).unwrap_err();
        assert!(e.starts_with("keys[0]: "), "{e}");
        let top = format!("version = 1\n{}", entry("a", &good));
        let e = ApiKeys::parse(&top).unwrap_err();
        assert!(
            e.starts_with("line 1, column 1: unknown field `version`"),
            "{e}"
        );
        let e = ApiKeys::parse("[[keys]\n").unwrap_err();
        assert!(e.starts_with("line 1, column "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn load_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(&path, file()).unwrap();
        let path = path.to_str().unwrap();
        assert_eq!(ApiKeys::load(path).unwrap().len(), 2);
        std::fs::write(path, entry("", &hex(b"k"))).unwrap();
        assert_eq!(
            ApiKeys::load(path).err(),
            Some(format!("{path}: keys[0].id: empty"))
        );
        let gone = dir.path().join("gone.toml");
        let gone = gone.to_str().unwrap();
        let e = ApiKeys::load(gone).unwrap_err();
        assert!(e.starts_with(&format!("{gone}: ")), "{e}");
    }

    #[test]
    fn key_from_header_or_apikey_scheme() {
        assert_eq!(key_of(Some(b"k1"), None), Some(&b"k1"[..]));
        assert_eq!(key_of(None, Some(b"ApiKey k2")), Some(&b"k2"[..]));
        assert_eq!(key_of(None, Some(b"apikey k2")), Some(&b"k2"[..]));
        assert_eq!(key_of(None, Some(b"APIKEY   k2 ")), Some(&b"k2"[..]));
        assert_eq!(key_of(None, Some(b"Bearer k2")), None);
        assert_eq!(key_of(None, Some(b"ApiKeyk2")), None);
        assert_eq!(key_of(None, Some(b"ApiKey")), None);
        assert_eq!(key_of(None, Some(b"ApiKey  ")), None);
        assert_eq!(key_of(None, Some(b"Api")), None);
        assert_eq!(key_of(None, None), None);
    }

    #[test]
    fn header_comes_first() {
        assert_eq!(key_of(Some(b"k1"), Some(b"ApiKey k2")), Some(&b"k1"[..]));
        assert_eq!(key_of(Some(b" k1 "), Some(b"Bearer t")), Some(&b"k1"[..]));
        // An empty header is no key; the Authorization one is used then.
        assert_eq!(key_of(Some(b""), Some(b"ApiKey k2")), Some(&b"k2"[..]));
        assert_eq!(key_of(Some(b"  "), None), None);
    }

    #[test]
    fn a_presented_key_finds_its_caller() {
        let keys = ApiKeys::parse(&file()).unwrap();
        let key = key_of(None, Some(b"apiKEY ci-secret-0123456789")).unwrap();
        assert_eq!(&*keys.find(key).unwrap().id, "ci-bot");
        let key = key_of(Some(b"dash-secret-abcdefgh"), None).unwrap();
        assert_eq!(&*keys.find(key).unwrap().id, "dashboard");
    }
}
