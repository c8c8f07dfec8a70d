//! What an update carries. Most events of a stream are text deltas, so those have a compact
//! form ([`TextDelta`]): the text kept as the JSON-escaped text sid's line held, its frame written
//! straight from it, and a `Map` built only where a reader asks for one
//! ([`Payload::fields`]: the A2A shapes, the cluster encoding). The reader of sid's stdout is the
//! one serial step of a flood, and a map of four members, built, read and dropped per line, was a
//! third of its work there.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

/// An update's fields: a JSON object, or a text delta without one.
#[derive(Clone, Debug)]
pub enum Payload {
    /// Any update's fields.
    Fields(Map<String, Value>),
    /// `{"append": true, "artifact": …, "contextId": …, "text": …}`, kept compact.
    Delta(TextDelta),
}

impl From<Map<String, Value>> for Payload {
    fn from(m: Map<String, Value>) -> Self {
        Payload::Fields(m)
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Fields(Map::new())
    }
}

/// Equal when the fields are: a delta equals the map it stands for.
impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Payload::Fields(a), Payload::Fields(b)) => a == b,
            (Payload::Delta(a), Payload::Delta(b)) => a == b,
            _ => self.fields() == other.fields(),
        }
    }
}

impl Payload {
    /// The fields as a map: borrowed, or built for a delta.
    pub fn fields(&self) -> Cow<'_, Map<String, Value>> {
        match self {
            Payload::Fields(m) => Cow::Borrowed(m),
            Payload::Delta(d) => Cow::Owned(d.to_map()),
        }
    }

    /// The fields as an owned map.
    pub fn into_fields(self) -> Map<String, Value> {
        match self {
            Payload::Fields(m) => m,
            Payload::Delta(d) => d.to_map(),
        }
    }

    /// Whether the update ends its task (`final: true`); a delta never does.
    pub fn is_final(&self) -> bool {
        match self {
            Payload::Fields(m) => m.get("final").and_then(Value::as_bool) == Some(true),
            Payload::Delta(_) => false,
        }
    }

    /// The `state` member of a status update, if it has one; a delta has none.
    pub fn state(&self) -> Option<&str> {
        match self {
            Payload::Fields(m) => m.get("state").and_then(Value::as_str),
            Payload::Delta(_) => None,
        }
    }

    /// Sets `contextId`, as the session does for every update it publishes.
    pub fn set_context(&mut self, context_id: &Arc<str>) {
        match self {
            Payload::Fields(m) => {
                m.insert("contextId".into(), Value::from(&**context_id));
            }
            Payload::Delta(d) => d.context_id = Some(context_id.clone()),
        }
    }

    /// How many members the fields have (for sizing a frame).
    pub fn len(&self) -> usize {
        match self {
            Payload::Fields(m) => m.len(),
            Payload::Delta(d) => 3 + usize::from(d.context_id.is_some()),
        }
    }

    /// Whether the fields are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which of a turn's artifacts a text delta appends to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeltaArtifact {
    /// The answer (`assistant_text_delta`).
    Response,
    /// The model's thinking (`thinking_delta`).
    Thinking,
}

impl DeltaArtifact {
    /// The artifact's name, the update's `artifact` member.
    pub fn name(self) -> &'static str {
        match self {
            DeltaArtifact::Response => "response",
            DeltaArtifact::Thinking => "thinking",
        }
    }
}

/// A text delta's update without a map: `append` is always `true`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextDelta {
    artifact: DeltaArtifact,
    /// The text as a JSON string's contents (no quotes), escaped exactly as serde_json escapes
    /// it, so the frame written from it is the map's frame byte for byte.
    escaped: Box<str>,
    /// `contextId`, once the session set it.
    context_id: Option<Arc<str>>,
}

impl TextDelta {
    /// A delta of `text`. `raw` is the text as sid's line wrote it between the quotes, as
    /// [`crate::wire::scan`] accepted it (escapes among `\" \\ \/ \b \f \n \r \t`, no `\u`, no
    /// raw control character); it is kept as it is when serde_json writes `text` the same way,
    /// which is always but for `\/` (serde_json writes `/` bare).
    pub fn new(artifact: DeltaArtifact, text: &str, raw: Option<&str>) -> Self {
        let escaped: Box<str> = match raw {
            Some(raw) if !raw.contains("\\/") => raw.into(),
            _ => escape(text).into(),
        };
        debug_assert_eq!(*escaped, *escape(text), "{raw:?}");
        TextDelta {
            artifact,
            escaped,
            context_id: None,
        }
    }

    /// Which artifact it appends to.
    pub fn artifact(&self) -> DeltaArtifact {
        self.artifact
    }

    /// The text, decoded.
    pub fn text(&self) -> Cow<'_, str> {
        if self.escaped.contains('\\') {
            let quoted = format!("\"{}\"", self.escaped);
            Cow::Owned(serde_json::from_str(&quoted).expect("escaped as serde_json escapes"))
        } else {
            Cow::Borrowed(&self.escaped)
        }
    }

    /// The text as a JSON string's contents, escaped.
    pub fn escaped(&self) -> &str {
        &self.escaped
    }

    /// `contextId`, when set.
    pub fn context_id(&self) -> Option<&str> {
        self.context_id.as_deref()
    }

    /// The map this delta stands for.
    fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("append".into(), Value::Bool(true));
        m.insert("artifact".into(), Value::from(self.artifact.name()));
        if let Some(c) = &self.context_id {
            m.insert("contextId".into(), Value::from(&**c));
        }
        m.insert("text".into(), Value::from(self.text().into_owned()));
        m
    }

    /// The members of `params` in the map's order (`append`, `artifact`, `contextId`, `text`:
    /// a `serde_json::Map` is sorted), as compact JSON without the braces; `len` of it first.
    pub(crate) fn params_len(&self) -> usize {
        // "append":true,"artifact":"…","text":"…"
        let mut n = 37 + self.artifact.name().len() + self.escaped.len();
        if let Some(c) = &self.context_id {
            n += 13 + json_str_len(c); // ,"contextId":…
        }
        n
    }

    /// Appends the members ([`params_len`](Self::params_len) bytes).
    pub(crate) fn write_params(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\"append\":true,\"artifact\":\"");
        out.extend_from_slice(self.artifact.name().as_bytes());
        out.push(b'"');
        if let Some(c) = &self.context_id {
            out.extend_from_slice(b",\"contextId\":");
            crate::wire::write_json_str(out, c);
        }
        out.extend_from_slice(b",\"text\":\"");
        out.extend_from_slice(self.escaped.as_bytes());
        out.push(b'"');
    }
}

/// `s` as a JSON string's contents, as serde_json escapes it.
fn escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).expect("a str always serialises");
    quoted[1..quoted.len() - 1].to_owned()
}

/// The length of `s` written as a JSON string by [`crate::wire::write_json_str`].
pub(crate) fn json_str_len(s: &str) -> usize {
    if crate::wire::scan::is_plain(s.as_bytes()) {
        s.len() + 2
    } else {
        escape(s).len() + 2
    }
}
