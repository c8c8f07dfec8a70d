//! Method → route by glob, first match wins. Which upstream of the route then serves the call
//! (its one `upstream`, or a side of its `split`) is `migration`'s to say.

use crate::config::Route;

/// Compiled routes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Router {
    routes: Vec<(Vec<String>, usize)>,
}

impl Router {
    /// The routes' globs, in order.
    pub(crate) fn new(routes: &[Route]) -> Self {
        Router {
            routes: routes
                .iter()
                .enumerate()
                .map(|(i, r)| (r.methods.clone(), i))
                .collect(),
        }
    }

    /// The index of the route serving `method` (its position in `[[routes]]`), and the glob
    /// that matched it.
    pub(crate) fn route(&self, method: &str) -> Option<(usize, &str)> {
        self.routes.iter().find_map(|(globs, idx)| {
            globs
                .iter()
                .find(|g| glob_match(g, method))
                .map(|g| (*idx, g.as_str()))
        })
    }
}

/// `*` matches any run of characters (slashes and dots included), `?` exactly one.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    // The shapes nearly every route uses, on every call: `*`, `prefix.*`, and a plain name.
    match pattern
        .as_bytes()
        .iter()
        .position(|&b| b == b'*' || b == b'?')
    {
        None => return pattern == text,
        Some(i) if i == pattern.len() - 1 && pattern.ends_with('*') => {
            return text.starts_with(&pattern[..i])
        }
        _ => {}
    }
    // Method names are ASCII in practice: matched as bytes, without collecting characters.
    if pattern.is_ascii() && text.is_ascii() {
        return matches(pattern.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    matches(&p, &t, '*', '?')
}

/// Glob matching with one backtrack point (the last `*`), linear in practice.
fn matches<T: PartialEq + Copy>(p: &[T], t: &[T], any: T, one: T) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == one || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == any {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(
            "_cleveragents/plan/*",
            "_cleveragents/plan/status"
        ));
        assert!(glob_match("session.*", "session.create"));
        assert!(!glob_match("session.*", "sessions.create"));
        assert!(glob_match("*", "anything/at.all"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
        assert!(
            glob_match("caf?.*", "caf\u{e9}.get"),
            "? is one character, not one byte"
        );
        assert!(!glob_match("caf??.*", "caf\u{e9}.get"));
        assert!(glob_match("*\u{e9}", "caf\u{e9}"));
        assert!(glob_match("", "") && !glob_match("", "a"));
    }

    proptest::proptest! {
        /// The shortcuts for `*`, `prefix*` and plain names answer as the general matcher does.
        #[test]
        fn shortcuts_agree_with_the_matcher(p in "[ab.*?]{0,6}", t in "[ab.]{0,6}") {
            let general = matches(p.as_bytes(), t.as_bytes(), b'*', b'?');
            proptest::prop_assert_eq!(glob_match(&p, &t), general);
        }
    }

    #[test]
    fn first_match_wins() {
        let routes = vec![
            Route::to(&["plan.get"], "new"),
            Route::to(&["plan.*"], "old"),
        ];
        let r = Router::new(&routes);
        assert_eq!(r.route("plan.get").unwrap(), (0, "plan.get"));
        assert_eq!(r.route("plan.list").unwrap(), (1, "plan.*"));
        assert!(r.route("other").is_none());
    }
}
