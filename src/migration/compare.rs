//! Comparing a primary's answer with a shadow's, both in JSON-RPC terms (`{"result": ..}` or
//! `{"error": ..}`). Pure: values in, the JSON pointers that differ out.
//!
//! Results are equal as JSON once the route's `shadow_ignore` pointers are removed from both;
//! errors are equal by code (messages are free text and differ between servers by nature). With
//! a noise instance (a second instance of the primary's server), a pointer that also differs
//! between the two primaries is noise, not a difference: Diffy's idea, per call.

use serde_json::Value;

/// Most pointers reported for one call (a wholly different answer is one pointer anyway).
pub(crate) const MAX_POINTERS: usize = 32;
/// Longest value text kept in a reported difference, in characters.
pub(crate) const MAX_VALUE_CHARS: usize = 200;

/// One differing place.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PointerDiff {
    /// JSON pointer into `{"result": ..}` / `{"error": ..}`.
    pub pointer: String,
    /// The primary's value there (JSON text, cut), or `(absent)`.
    pub primary: String,
    /// The shadow's value there (JSON text, cut), or `(absent)`.
    pub shadow: String,
}

/// What a comparison found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Equal (after ignoring).
    Match,
    /// Every difference also differs between the two primaries.
    Noise,
    /// Differences that are not noise.
    Diff(Vec<PointerDiff>),
}

impl Verdict {
    /// The metric / report label.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Verdict::Match => "match",
            Verdict::Noise => "noise",
            Verdict::Diff(_) => "diff",
        }
    }
}

/// The comparison of one call: `noise` is the second primary's answer, when there is one.
pub(crate) fn compare(
    primary: &Value,
    shadow: &Value,
    noise: Option<&Value>,
    ignore: &[String],
) -> Verdict {
    let (p, s) = (stripped(primary, ignore), stripped(shadow, ignore));
    let differing = pointers(&p, &s);
    if differing.is_empty() {
        return Verdict::Match;
    }
    let noisy: Vec<String> = noise
        .map(|n| pointers(&p, &stripped(n, ignore)))
        .unwrap_or_default();
    let real: Vec<PointerDiff> = differing
        .into_iter()
        .filter(|d| !noisy.iter().any(|n| covers(n, d)))
        .map(|ptr| PointerDiff {
            primary: value_at(&p, &ptr),
            shadow: value_at(&s, &ptr),
            pointer: ptr,
        })
        .collect();
    match real.is_empty() {
        true => Verdict::Noise,
        false => Verdict::Diff(real),
    }
}

/// The pointers at which two answers differ: errors by code, results structurally.
pub(crate) fn pointers(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match (a.get("error"), b.get("error")) {
        (Some(ea), Some(eb)) => {
            if ea.get("code") != eb.get("code") {
                out.push("/error/code".to_owned());
            }
        }
        (None, None) => walk(a, b, &mut String::new(), &mut out),
        // One answered, the other failed: the whole answer differs.
        _ => out.push(String::new()),
    }
    out
}

fn walk(a: &Value, b: &Value, path: &mut String, out: &mut Vec<String>) {
    if a == b || out.len() >= MAX_POINTERS {
        return;
    }
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&escape(k));
                match (ma.get(k), mb.get(k)) {
                    (Some(x), Some(y)) => walk(x, y, path, out),
                    _ => {
                        if out.len() < MAX_POINTERS {
                            out.push(path.clone());
                        }
                    }
                }
                path.truncate(len);
            }
        }
        (Value::Array(va), Value::Array(vb)) if va.len() == vb.len() => {
            for (i, (x, y)) in va.iter().zip(vb).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(x, y, path, out);
                path.truncate(len);
            }
        }
        _ => out.push(path.clone()),
    }
}

/// `n` is `d` or one of its ancestors.
fn covers(n: &str, d: &str) -> bool {
    d == n || (d.starts_with(n) && d.as_bytes().get(n.len()) == Some(&b'/'))
}

/// `v` without the values at `ignore`: a copy only when there is something to ignore.
fn stripped<'a>(v: &'a Value, ignore: &[String]) -> std::borrow::Cow<'a, Value> {
    if ignore.is_empty() {
        return std::borrow::Cow::Borrowed(v);
    }
    let mut v = v.clone();
    for p in ignore {
        remove(&mut v, p);
    }
    std::borrow::Cow::Owned(v)
}

fn remove(v: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = unescape(last);
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(&last);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
        _ => {}
    }
}

/// The JSON text at `pointer`, cut to [`MAX_VALUE_CHARS`] characters.
fn value_at(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(x) => cut(&x.to_string(), MAX_VALUE_CHARS),
        None => "(absent)".to_owned(),
    }
}

/// `s` cut to at most `max` characters.
pub(crate) fn cut(s: &str, max: usize) -> String {
    cut_str(s, max).to_owned()
}

/// [`cut`], borrowed.
pub(crate) fn cut_str(s: &str, max: usize) -> &str {
    // No more bytes than `max`: no more characters either.
    if s.len() <= max {
        return s;
    }
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn unescape(k: &str) -> String {
    k.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_results_match_and_ignored_fields_do_not_count() {
        let p = json!({"result": {"a": 1, "updated_at": "t1"}});
        let s = json!({"result": {"a": 1, "updated_at": "t2"}});
        assert_eq!(compare(&p, &p, None, &[]), Verdict::Match);
        assert_eq!(
            compare(&p, &s, None, &["/result/updated_at".into()]),
            Verdict::Match
        );
        assert_eq!(
            compare(&p, &s, None, &[]),
            Verdict::Diff(vec![PointerDiff {
                pointer: "/result/updated_at".into(),
                primary: "\"t1\"".into(),
                shadow: "\"t2\"".into(),
            }])
        );
    }

    #[test]
    fn nested_arrays_missing_keys_and_escapes() {
        let p = json!({"result": {"l": [1, {"x": 2}], "a/b": 1, "gone": true}});
        let s = json!({"result": {"l": [1, {"x": 3}], "a/b": 2}});
        assert_eq!(
            pointers(&p, &s),
            vec!["/result/a~1b", "/result/gone", "/result/l/1/x"]
        );
        let longer = json!({"result": {"l": [1, 2, 3]}});
        let shorter = json!({"result": {"l": [1, 2]}});
        assert_eq!(pointers(&longer, &shorter), vec!["/result/l"]);
        let Verdict::Diff(d) = compare(&p, &s, None, &[]) else {
            panic!()
        };
        assert_eq!(d[1].shadow, "(absent)");
    }

    #[test]
    fn errors_compare_by_code_and_a_result_is_not_an_error() {
        let e1 = json!({"error": {"code": -32001, "message": "plan P9 does not exist"}});
        let e2 = json!({"error": {"code": -32001, "message": "no such plan"}});
        let e3 = json!({"error": {"code": -32603, "message": "boom"}});
        let ok = json!({"result": null});
        assert_eq!(compare(&e1, &e2, None, &[]), Verdict::Match);
        assert_eq!(pointers(&e1, &e3), vec!["/error/code"]);
        assert_eq!(pointers(&e1, &ok), vec![""]);
    }

    #[test]
    fn noise_is_what_the_two_primaries_disagree_on() {
        let p = json!({"result": {"nonce": 1, "meta": {"ts": 5}, "v": "a"}});
        let n = json!({"result": {"nonce": 2, "meta": {"ts": 6}, "v": "a"}});
        let s_noisy = json!({"result": {"nonce": 3, "meta": {"ts": 7}, "v": "a"}});
        let s_diff = json!({"result": {"nonce": 3, "meta": {"ts": 7}, "v": "b"}});
        assert_eq!(compare(&p, &s_noisy, Some(&n), &[]), Verdict::Noise);
        let Verdict::Diff(d) = compare(&p, &s_diff, Some(&n), &[]) else {
            panic!("expected a diff")
        };
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].pointer, "/result/v");
        assert!(covers("/result/meta", "/result/meta/ts"));
        assert!(!covers("/result/me", "/result/meta"));
        assert!(covers("", "/anything"));
    }

    #[test]
    fn values_are_cut_and_pointers_bounded() {
        let long = "x".repeat(500);
        let p = json!({"result": {"s": long}});
        let s = json!({"result": {"s": "y"}});
        let Verdict::Diff(d) = compare(&p, &s, None, &[]) else {
            panic!()
        };
        assert_eq!(d[0].primary.chars().count(), MAX_VALUE_CHARS);
        assert_eq!(cut("héllo", 2), "hé");
        let many_a: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let many_b: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(-i - 1))).collect();
        let got = pointers(
            &json!({"result": Value::Object(many_a)}),
            &json!({"result": Value::Object(many_b)}),
        );
        assert_eq!(got.len(), MAX_POINTERS);
    }
}
