//! What an update carries. Most events of a stream are text deltas, so those have a compact
//! form ([`TextDelta`]): the text kept as the JSON-escaped text sid's line held, its frame written
//! straight from it, and a `Map` built only where a reader asks for one
//! ([`Payload::fields`]: the A2A shapes, the cluster encoding). The reader of sid's stdout is the
//! one serial step of a flood, and a map of four members, built, read and dropped per line, was a
//! third of its work there.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::wire::json_str_contents;
use crate::wire::raw::DeltaArtifact;

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
            _ => json_str_contents(text).into(),
        };
        debug_assert_eq!(*escaped, *json_str_contents(text), "{raw:?}");
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

    /// The members of `params`, to be written into a frame sized before it is written.
    pub(crate) fn params(&self) -> DeltaParams<'_> {
        DeltaParams {
            delta: self,
            context_id: self.context_id.as_deref().map(json_str_contents),
        }
    }
}

/// A delta's members of `params` in the map's order (`append`, `artifact`, `contextId`, `text`:
/// a `serde_json::Map` is sorted), as compact JSON without the braces: their
/// [`len`](Self::len), then their bytes ([`write`](Self::write)). The context id is scanned for
/// escapes once, for both.
pub(crate) struct DeltaParams<'a> {
    delta: &'a TextDelta,
    /// `contextId`'s contents as [`crate::wire::write_json_str`] writes them.
    context_id: Option<Cow<'a, str>>,
}

impl DeltaParams<'_> {
    /// How many bytes [`write`](Self::write) appends.
    pub(crate) fn len(&self) -> usize {
        let d = self.delta;
        // "append":true,"artifact":"…","text":"…"
        let n = 37 + d.artifact.name().len() + d.escaped.len();
        // ,"contextId":"…"
        n + self.context_id.as_ref().map_or(0, |c| 15 + c.len())
    }

    /// Appends the members.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let d = self.delta;
        out.extend_from_slice(b"\"append\":true,\"artifact\":\"");
        out.extend_from_slice(d.artifact.name().as_bytes());
        out.push(b'"');
        if let Some(c) = &self.context_id {
            out.extend_from_slice(b",\"contextId\":\"");
            out.extend_from_slice(c.as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b",\"text\":\"");
        out.extend_from_slice(d.escaped.as_bytes());
        out.push(b'"');
    }
}
