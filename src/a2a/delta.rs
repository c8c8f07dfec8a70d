//! A text delta's stream `result` in the 1.0 and 0.3 shapes, written straight as compact JSON.
//! Pure: no I/O.
//!
//! Most events of a spec stream are text deltas. [`UpdateWriter::result`] builds each one's
//! update as a tree of maps (the update, its artifact, its part, its metadata) only for the
//! tree to be serialised and dropped; here the same bytes are written from the delta
//! ([`TextDelta`]: its text kept escaped as sid's line held it), as the seed dialect's frame is
//! ([`crate::model::event::A2aEvent::to_sse`]). The members are written in the order the tree
//! serialises them (a `serde_json::Map` is sorted).
//!
//! [`UpdateWriter::result`]: super::shapes::UpdateWriter::result

use super::Version;
use crate::model::payload::TextDelta;
use crate::wire::write_json_str;

/// Appends the `result` of a text delta of task `task_id` (`""` without one), as
/// `UpdateWriter::result` serialises it; `append` is what it decides from the artifacts its
/// subscriber has seen.
pub(super) fn write_result(
    version: Version,
    d: &TextDelta,
    task_id: &str,
    append: bool,
    out: &mut Vec<u8>,
) {
    let name = d.artifact().name();
    if version == Version::V1_0 {
        out.extend_from_slice(b"{\"artifactUpdate\":");
    }
    out.extend_from_slice(match append {
        true => b"{\"append\":true,\"artifact\":{\"artifactId\":\"",
        false => b"{\"append\":false,\"artifact\":{\"artifactId\":\"",
    });
    // The artifact's id and name are its fixed name (`response`, `thinking`): nothing to escape.
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\",\"name\":\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(match version {
        Version::V1_0 => b"\",\"parts\":[{\"text\":\"",
        Version::V0_3 => b"\",\"parts\":[{\"kind\":\"text\",\"text\":\"",
    });
    out.extend_from_slice(d.escaped().as_bytes());
    out.extend_from_slice(b"\"}]},\"contextId\":");
    write_json_str(out, d.context_id().unwrap_or(""));
    if version == Version::V0_3 {
        out.extend_from_slice(b",\"kind\":\"artifact-update\"");
    }
    // A delta's members are all the update's own fields: its metadata is empty.
    out.extend_from_slice(b",\"lastChunk\":false,\"metadata\":{},\"taskId\":");
    write_json_str(out, task_id);
    out.push(b'}');
    if version == Version::V1_0 {
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::BytesMut;
    use proptest::prelude::*;

    use super::super::shapes::UpdateWriter;
    use super::super::SpecEncoder;
    use super::*;
    use crate::model::event::{A2aEvent, EventKind};
    use crate::model::payload::Payload;
    use crate::model::task::Tracker;
    use crate::wire::jsonrpc::Id;
    use crate::wire::raw::DeltaArtifact;

    /// A request id of any kind: none (the REST binding), null, a number as a client may
    /// write it, a string that needs escapes or none.
    fn any_id() -> impl Strategy<Value = Option<Id>> {
        prop::option::of(prop_oneof![
            Just(Id::Null),
            "-?[0-9]{1,20}(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?".prop_filter_map(
                "an id",
                |text| {
                    let raw = serde_json::value::RawValue::from_string(text).ok()?;
                    Id::from_raw(&raw)
                }
            ),
            "\\PC{0,8}|[\"\\\\\u{1}é]{1,3}".prop_map(Id::String),
        ])
    }

    proptest! {
        /// A text delta's spec frame, written from the delta, is byte for byte the frame of
        /// the serialised `result` tree it replaces, in both versions, under any request id,
        /// as an artifact's first chunk and as a later one.
        #[test]
        fn a_delta_frame_is_its_result_trees_frame(
            text in "\\PC{0,12}|[\"\\\\/\u{0}-\u{1f}\u{7f}é]{0,6}",
            context in prop::option::of("\\PC{0,8}|[\"\\\\\u{1}]{1,3}"),
            plan in prop::option::of("\\PC{0,8}|[\"\\\\\u{1}]{1,3}"),
            thinking in any::<bool>(),
            old in any::<bool>(),
            id in any_id(),
            answered_before in any::<bool>(),
            event_id in "[0-9]{0,3}",
        ) {
            let version = if old { Version::V0_3 } else { Version::V1_0 };
            let artifact = if thinking { DeltaArtifact::Thinking } else { DeltaArtifact::Response };
            let mut data = Payload::Delta(TextDelta::new(artifact, &text, None));
            if let Some(c) = &context {
                data.set_context(&Arc::from(c.as_str()));
            }
            let mut ev = A2aEvent::new(EventKind::Artifact, plan, data);
            ev.event_id = event_id;
            let mut tree = ev.clone();
            tree.data = Payload::Fields(ev.data.fields().into_owned());
            // The subscriber's task: with an answer already (its `response` artifact seen) or
            // without.
            let mut tracker = Tracker::default();
            tracker.begin("t1");
            let mut task = tracker.task("t1").unwrap().clone();
            if answered_before {
                task.response = "earlier".into();
            }
            let encoder = || SpecEncoder {
                id: id.clone(),
                version,
                writer: UpdateWriter::new(version, &task),
                scratch: Vec::new(),
            };
            let (mut by_delta, mut by_tree) = (encoder(), encoder());
            for chunk in ["first", "later"] {
                let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
                by_delta.encode(&ev, &mut a);
                by_tree.encode(&tree, &mut b);
                prop_assert_eq!(&a, &b, "{} chunk", chunk);
            }
        }
    }
}
