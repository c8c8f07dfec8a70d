//! A strict scanner over one JSON object's top-level members, for the hottest lines and bodies
//! (sid's text deltas, a call's request object, a legacy answer's envelope): it hands each
//! member's name and raw value text to the caller in one pass over the bytes, with no tree and no
//! serde machinery.
//!
//! It only ever vouches for text serde_json accepts too. Anything it is not sure of (a member
//! name with an escape, a `\u` escape anywhere, nesting deeper than [`MAX_DEPTH`], bad syntax,
//! trailing text) makes it answer `None`, and the caller then takes serde_json's path, which
//! accepts or refuses the text with its own error: so errors stay exactly serde_json's.

/// Deepest nesting the scanner follows (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 64;

/// Calls `each(name, raw value, escaped)` for every top-level member of the object `text` is, in
/// order, and returns `Some(())` when the whole text is one valid object; `escaped` says the
/// value is a string holding an escape (what [`string`] needs to know, so it need not look
/// again). `each` returning `None` stops the scan (and the answer is `None`).
pub(crate) fn members<'a>(
    text: &'a str,
    each: impl FnMut(&'a str, &'a str, bool) -> Option<()>,
) -> Option<()> {
    members_deferring(text, |_| false, each)
}

/// [`members`], but the object or array value of a member whose name `defers` is only
/// delimited (its brackets matched, its strings skipped), not checked: for the members whose
/// caller reads the value with serde_json all the same (a call's `params`, an answer's `data`),
/// so the bytes are checked once. `each` must refuse (answer `None` for) such a value that
/// serde_json does not accept: what the scanner vouches for is then still only what serde_json
/// accepts.
pub(crate) fn members_deferring<'a>(
    text: &'a str,
    defers: impl Fn(&str) -> bool,
    mut each: impl FnMut(&'a str, &'a str, bool) -> Option<()>,
) -> Option<()> {
    let mut s = Scan {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    s.eat(b'{')?;
    s.ws();
    if s.eat(b'}').is_none() {
        loop {
            let start = s.i;
            if s.string()? {
                return None; // an escaped member name: serde_json's to decode
            }
            let name = &text[start + 1..s.i - 1];
            s.ws();
            s.eat(b':')?;
            s.ws();
            let start = s.i;
            // Most of a line's values are strings: read here, without the call into `value`.
            let escaped = match s.b.get(s.i) {
                Some(b'"') => s.string()?,
                Some(b'{' | b'[') if defers(name) => s.delimit()?,
                _ => s.value(1)?,
            };
            each(name, &text[start..s.i], escaped)?;
            s.ws();
            if s.eat(b',').is_some() {
                s.ws();
                continue;
            }
            s.eat(b'}')?;
            break;
        }
    }
    s.ws();
    (s.i == s.b.len()).then_some(())
}

/// Fills `slot` with `value` once: `None` (the scan stops) when the member came before, or when
/// its value could not be read. What every reader of an envelope's members does, so a member sent
/// twice is serde_json's to refuse ("duplicate field"), with the error it gives without a scanner.
pub(crate) fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    match slot {
        Some(_) => None,
        None => value.map(|v| *slot = Some(v)),
    }
}

/// `raw`, the text of a JSON string the scanner accepted (`None` for any other value), as the
/// string: borrowed when it holds no escape (`escaped`, as [`members`] said), else decoded by
/// serde_json.
pub(crate) fn string(raw: &str, escaped: bool) -> Option<std::borrow::Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if escaped {
        serde_json::from_str::<String>(raw).ok().map(Into::into)
    } else {
        Some(inner.into())
    }
}

/// `raw` as an unsigned integer, when it is written as plain digits (what sid writes).
pub(crate) fn unsigned(raw: &str) -> Option<u64> {
    match raw.as_bytes() {
        [b'0'] => Some(0),
        [b'1'..=b'9', ..] => raw.bytes().try_fold(0u64, |n, b| {
            let digit = b.checked_sub(b'0').filter(|d| *d <= 9)?;
            n.checked_mul(10)?.checked_add(u64::from(digit))
        }),
        _ => None,
    }
}

/// The bytes of the word `w` (eight bytes, little-endian) that a JSON string cannot hold as
/// they are (`"`, `\\`, a control character): non-zero when there is one, its lowest set bit in
/// the first such byte (the bits above it may be wrong).
fn needs_look(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero: its high bit set in the answer (exact for the lowest one).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    zero(w ^ (ONES * u64::from(b'"')))
        | zero(w ^ (ONES * u64::from(b'\\')))
        | zero(w & (ONES * 0xe0))
}

/// Whether `s` can be written between a JSON string's quotes as it is (no `"`, `\\` or control
/// character), tested eight bytes at a time: the ids and names of every frame go through this.
pub(crate) fn is_plain(s: &[u8]) -> bool {
    let mut words = s.chunks_exact(8);
    for w in &mut words {
        if needs_look(u64::from_le_bytes(w.try_into().expect("eight bytes"))) != 0 {
            return false;
        }
    }
    words
        .remainder()
        .iter()
        .all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A string from its opening quote; `Some(true)` when it holds an escape.
    #[inline(always)]
    fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let mut escaped = false;
        loop {
            self.plain();
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.b.get(self.i)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        _ => return None, // `\u` (surrogates are serde_json's to judge) or bad
                    }
                }
                0..=0x1f => return None,
                _ => {}
            }
        }
    }

    /// Skips the bytes of a string that need no look (not `"`, `\\`, nor a control
    /// character), eight at a time (a word's bytes tested at once), up to the first that does
    /// or the last whole word: most of a line's bytes are in strings, and a byte at a time measured
    /// dearer (docs/performance.md).
    fn plain(&mut self) {
        while let Some(word) = self.b.get(self.i..self.i + 8) {
            let hits = needs_look(u64::from_le_bytes(word.try_into().expect("eight bytes")));
            if hits != 0 {
                self.i += (hits.trailing_zeros() / 8) as usize;
                return;
            }
            self.i += 8;
        }
    }

    fn digits(&mut self) -> Option<()> {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.b.get(self.i)? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits()?,
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    /// An object or array from its opening bracket to the one that closes it, the strings in
    /// it skipped (a quote after a backslash is no string's end), nothing else checked:
    /// `Some(false)`, or `None` when the text ends first or nests deeper than [`MAX_DEPTH`].
    fn delimit(&mut self) -> Option<bool> {
        let mut depth = 0u32;
        loop {
            match *self.b.get(self.i)? {
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return None;
                    }
                }
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Some(false);
                    }
                }
                b'"' => {
                    self.i += 1;
                    loop {
                        self.plain();
                        match *self.b.get(self.i)? {
                            b'"' => break,
                            b'\\' => self.i += 2,
                            _ => self.i += 1,
                        }
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// A value; `Some(true)` when it is a string holding an escape.
    fn value(&mut self, depth: u32) -> Option<bool> {
        match *self.b.get(self.i)? {
            b'"' => self.string(),
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.eat(b'}').is_some() {
                    return Some(false);
                }
                loop {
                    self.string()?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    if self.eat(b',').is_none() {
                        return self.eat(b'}').map(|()| false);
                    }
                    self.ws();
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(false);
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    if self.eat(b',').is_none() {
                        return self.eat(b']').map(|()| false);
                    }
                    self.ws();
                }
            }
            b't' => self.literal(b"true").map(|()| false),
            b'f' => self.literal(b"false").map(|()| false),
            b'n' => self.literal(b"null").map(|()| false),
            b'-' | b'0'..=b'9' => self.number().map(|()| false),
            _ => None,
        }
    }
}

/// What the tests of the envelope readers built on the scanner share: the bodies they try and
/// the one comparison with serde_json.
#[cfg(test)]
pub(crate) mod envelopes {
    use proptest::prelude::*;

    /// An object of `member`s (the tests' own: some twice, some of the wrong type), spaced at
    /// random, sometimes with text after it.
    pub(crate) fn object(member: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        let space = prop_oneof![Just(""), Just(" "), Just("\r\n")];
        (
            prop::collection::vec(member, 0..5),
            space,
            prop_oneof![8 => Just(""), 1 => Just(","), 1 => Just("]")],
        )
            .prop_map(|(m, sp, tail)| format!("{sp}{{{}}}{sp}{tail}", m.join(&format!(",{sp}"))))
    }

    /// The scanner's reading of `text` is serde_json's: `scanned` (its reading, when it took the
    /// text) is what serde_json alone reads (`by_serde`), and `read` (the reader's answer,
    /// scanned or not) is serde_json's answer, its error message included.
    pub(crate) fn read_alike<T: std::fmt::Debug>(
        text: &str,
        scanned: Option<T>,
        read: serde_json::Result<T>,
        by_serde: serde_json::Result<T>,
    ) -> Result<(), TestCaseError> {
        let shown =
            |r: serde_json::Result<T>| r.map(|r| format!("{r:?}")).map_err(|e| e.to_string());
        let by_serde = shown(by_serde);
        if let Some(s) = scanned {
            prop_assert_eq!(&Ok(format!("{s:?}")), &by_serde, "{}", text);
        }
        prop_assert_eq!(shown(read), by_serde, "{}", text);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scanned(text: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        members(text, |k, v, escaped| {
            // What it says of an escape is what the value's text says.
            assert_eq!(escaped, v.starts_with('"') && v.contains('\\'), "{v}");
            out.push((k.to_owned(), v.to_owned()));
            Some(())
        })?;
        Some(out)
    }

    /// JSON values as serde_json writes them: strings with every kind of escape, nesting.
    fn json_value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
            "[a-z\\]\\[{}\"\\\\]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            any::<i64>().prop_map(|n| n.to_string()),
            Just("null".to_owned()),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(", "))),
                prop::collection::vec(("[a-z\\]\\[{}\"]{0,3}", inner), 0..4).prop_map(|v| {
                    let m: Vec<String> = v
                        .iter()
                        .map(|(k, v)| format!("{}: {v}", serde_json::to_string(k).unwrap()))
                        .collect();
                    format!("{{{}}}", m.join(","))
                }),
            ]
        })
    }

    #[test]
    fn reads_members_raw() {
        assert_eq!(
            scanned(
                r#" {"a" : 1, "r" : {"x":[1]} , "b":"x\"y", "c":{"d":[true,false,null,-1.5e+3]} , "e":[]} "#
            ),
            Some(vec![
                ("a".into(), "1".into()),
                ("r".into(), r#"{"x":[1]}"#.into()),
                ("b".into(), r#""x\"y""#.into()),
                ("c".into(), r#"{"d":[true,false,null,-1.5e+3]}"#.into()),
                ("e".into(), "[]".into()),
            ])
        );
        assert_eq!(scanned("{}"), Some(vec![]));
    }

    #[test]
    fn refuses_what_it_is_not_sure_of() {
        for text in [
            "",
            "[]",
            "{",
            r#"{"a":1,}"#,
            r#"{"a":1}x"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"\n":1}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":tru}"#,
            r#"{"a":[1,]}"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"r":{"x":}}"#,
            r#"{"r":1x}"#,
            r#"{"r":1 2}"#,
        ] {
            assert_eq!(scanned(text), None, "{text}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(80), "]".repeat(80));
        assert_eq!(scanned(&deep), None);
    }

    #[test]
    fn strings_and_numbers() {
        assert_eq!(string(r#""abc""#, false).unwrap(), "abc");
        assert_eq!(string(r#""a\nb\/""#, true).unwrap(), "a\nb/");
        assert_eq!(string("1", false), None);
        assert_eq!(unsigned("0"), Some(0));
        assert_eq!(unsigned("42"), Some(42));
        for bad in ["01", "-1", "1.0", "1e2", "", "18446744073709551616"] {
            assert_eq!(unsigned(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_deferred_member_is_delimited_and_the_others_checked() {
        let text = r#"{"p": {"a": [1, "x]\"}"], "b": {}}, "q": [2], "r": {"s": 1}}"#;
        let mut seen = Vec::new();
        let all = members_deferring(
            text,
            |n| n == "p",
            |k, v, _| {
                seen.push((k.to_owned(), v.to_owned()));
                Some(())
            },
        );
        assert_eq!(all, Some(()));
        assert_eq!(seen[0].1, r#"{"a": [1, "x]\"}"], "b": {}}"#);
        assert_eq!(seen[1].1, "[2]");
        // Delimited, not checked: a deferred value's caller checks it.
        let mut raw = String::new();
        let broken = r#"{"p": {"a" 1,,}, "q": 1}"#;
        assert!(members_deferring(
            broken,
            |n| n == "p",
            |k, v, _| {
                if k == "p" {
                    raw = v.to_owned();
                }
                Some(())
            }
        )
        .is_some());
        assert_eq!(raw, r#"{"a" 1,,}"#);
        // Not deferred: checked.
        assert!(members(broken, |_, _, _| Some(())).is_none());
        // A text that ends inside the value is refused.
        assert!(members_deferring(r#"{"p": {"a": "}"#, |_| true, |_, _, _| Some(())).is_none());
    }

    proptest! {
        /// A deferred member's value is delimited where the checking scan ends it, in any text
        /// the checking scan accepts.
        #[test]
        fn delimiting_ends_a_value_where_checking_does(v in json_value(), w in json_value()) {
            let text = format!(r#"{{"p": {v}, "q": {w}}}"#);
            let mut checked = Vec::new();
            let mut delimited = Vec::new();
            let a = members(&text, |_, raw, _| { checked.push(raw.to_owned()); Some(()) });
            let b = members_deferring(&text, |_| true, |_, raw, _| { delimited.push(raw.to_owned()); Some(()) });
            if a.is_some() {
                prop_assert_eq!(b, a);
                prop_assert_eq!(delimited, checked);
            }
        }

        /// Every u64 written in digits reads back; one past the largest does not.
        #[test]
        fn unsigned_reads_every_u64(n in any::<u64>()) {
            prop_assert_eq!(unsigned(&n.to_string()), Some(n));
            prop_assert_eq!(unsigned(&format!("{}0", u64::MAX / 10 + 1 + n % 1000)), None);
        }

        /// `is_plain` says what the byte-by-byte test says, at every length and position.
        #[test]
        fn is_plain_is_the_bytewise_test(text in "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é]{0,40}") {
            let bytewise = text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
            prop_assert_eq!(is_plain(text.as_bytes()), bytewise);
        }

        /// Whatever it accepts, serde_json accepts too, with the same members.
        #[test]
        fn accepts_only_what_serde_json_accepts(text in r#"[ {}\[\]":,a-cr0-9.eE+\-\\ntrufalsn]{0,40}"#) {
            if let Some(found) = scanned(&text) {
                let parsed: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&text).expect("serde_json accepts what the scanner did");
                // Last one wins, as in serde_json's map.
                let found: std::collections::HashMap<_, _> = found.into_iter().collect();
                prop_assert_eq!(found.len(), parsed.len());
                for (k, v) in &found {
                    let v: serde_json::Value = serde_json::from_str(v).unwrap();
                    prop_assert_eq!(parsed.get(k), Some(&v));
                }
            }
        }

        /// Long strings (read a word at a time) with a quote, a backslash or a control
        /// character anywhere: raw, the scanner accepts only what serde_json does; as serde_json
        /// writes them, it reads them back (but for `\u` escapes, left to serde_json).
        #[test]
        fn long_strings_are_read_exactly(text in "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é]{0,40}") {
            let raw = format!(r#"{{"k":"{text}","n":1}}"#);
            if let Some(found) = scanned(&raw) {
                let parsed: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&raw).expect("serde_json accepts what the scanner did");
                prop_assert_eq!(found.len(), parsed.len());
            } else if !text.contains(['"', '\\']) && !text.chars().any(|c| c < ' ') {
                prop_assert!(false, "refused {}", raw);
            }
            let written = serde_json::to_string(&serde_json::json!({"k": text})).unwrap();
            let found = scanned(&written);
            if !written.contains("\\u") {
                let found = found.expect("read");
                prop_assert_eq!(string(&found[0].1, found[0].1.contains('\\')).unwrap(), text.as_str());
            }
        }

        /// Valid objects serde_json writes are read back whole.
        #[test]
        fn reads_what_serde_json_writes(keys in prop::collection::vec("[a-z]{1,6}", 0..6), text in "[^\\\\]{0,20}") {
            let mut m = serde_json::Map::new();
            for (i, k) in keys.iter().enumerate() {
                m.insert(k.clone(), serde_json::json!({"t": text, "n": [i, -2.5, null, true]}));
            }
            let wire = serde_json::to_string(&m).unwrap();
            let found = scanned(&wire);
            // Control characters are written as `\u00XX`, which the scanner leaves to serde_json.
            if !text.chars().any(|c| c < ' ' && !"\n\r\t\u{8}\u{c}".contains(c)) {
                prop_assert_eq!(found.map(|f| f.len()), Some(m.len()));
            }
        }
    }
}
