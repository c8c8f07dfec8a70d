//! Server-Sent Events framing (WHATWG HTML, "Server-sent events").
//!
//! A frame is `event:`, `id:`, one `data:` line per line of payload, and a blank line. Payload
//! lines are split on CR, LF and CRLF, as the parser on the other side will split them, so a
//! multi-line payload arrives whole. Frames are encoded once and shared by every subscriber.

use bytes::{BufMut, Bytes, BytesMut};

/// Encodes one event frame.
pub fn frame(event: Option<&str>, id: Option<&str>, data: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 64);
    if let Some(event) = event {
        field(&mut out, "event", event);
    }
    if let Some(id) = id {
        field(&mut out, "id", id);
    }
    for line in lines(data) {
        field(&mut out, "data", line);
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// Encodes one event frame whose data is `value` as compact JSON, serialised straight into the
/// frame. Compact JSON holds no raw line break (strings escape them), so it is one `data:` line.
pub fn json_frame<T: serde::Serialize + ?Sized>(
    event: Option<&str>,
    id: Option<&str>,
    value: &T,
) -> Bytes {
    let mut out = BytesMut::with_capacity(256);
    write_json_frame(&mut out, event, id, value);
    out.freeze()
}

/// [`json_frame`], appended to `out`.
pub fn write_json_frame<T: serde::Serialize + ?Sized>(
    out: &mut BytesMut,
    event: Option<&str>,
    id: Option<&str>,
    value: &T,
) {
    if let Some(event) = event {
        field(out, "event", event);
    }
    if let Some(id) = id {
        field(out, "id", id);
    }
    out.put_slice(b"data: ");
    let mut w = out.writer();
    // Serialising a value that serde_json can represent cannot fail.
    let _ = serde_json::to_writer(&mut w, value);
    w.into_inner().put_slice(b"\n\n");
}

/// [`write_json_frame`] for data already written as compact JSON (one line, so one `data:`
/// line), appended to `out`.
pub fn write_json_line_frame(
    out: &mut BytesMut,
    event: Option<&str>,
    id: Option<&str>,
    json: &[u8],
) {
    debug_assert!(memchr::memchr2(b'\r', b'\n', json).is_none());
    if let Some(event) = event {
        field(out, "event", event);
    }
    if let Some(id) = id {
        field(out, "id", id);
    }
    out.put_slice(b"data: ");
    out.put_slice(json);
    out.put_slice(b"\n\n");
}

/// An event frame whose data line `write` appends as compact JSON (one line, as
/// [`json_frame`] gives): for a payload written by hand into a plain buffer, the stream's hot path.
pub fn json_frame_with(
    event: Option<&str>,
    id: Option<&str>,
    size_hint: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Bytes {
    let out = Vec::with_capacity(size_hint + 64);
    Bytes::from(json_frame_into(out, event, id, write))
}

/// [`json_frame_with`] for a payload of exactly `len` bytes: the frame's buffer is allocated
/// at its size, so it becomes the `Bytes` without a second allocation (a buffer with room to
/// spare needs one for its shared header).
pub fn json_frame_sized(
    event: Option<&str>,
    id: Option<&str>,
    len: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Bytes {
    let head = |name: &str, v: Option<&str>| v.map_or(0, |v| name.len() + 3 + v.len());
    let size = head("event", event) + head("id", id) + 6 + len + 2;
    let out = json_frame_into(Vec::with_capacity(size), event, id, write);
    debug_assert_eq!(out.len(), size, "{:?}", String::from_utf8_lossy(&out));
    Bytes::from(out)
}

fn json_frame_into(
    mut out: Vec<u8>,
    event: Option<&str>,
    id: Option<&str>,
    write: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    for (name, value) in [("event", event), ("id", id)] {
        if let Some(value) = value {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            match memchr::memchr2(b'\r', b'\n', value.as_bytes()) {
                None => out.extend_from_slice(value.as_bytes()),
                Some(_) => out.extend_from_slice(value.replace(['\r', '\n'], "").as_bytes()),
            }
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"data: ");
    write(&mut out);
    out.extend_from_slice(b"\n\n");
    out
}

/// A comment frame that keeps idle connections (and proxies) from timing out.
pub fn keepalive() -> Bytes {
    Bytes::from_static(b": keepalive\n\n")
}

/// Tells the client how long to wait before reconnecting.
pub fn retry(ms: u64) -> Bytes {
    Bytes::from(format!("retry: {ms}\n\n"))
}

fn field(out: &mut BytesMut, name: &str, value: &str) {
    out.put_slice(name.as_bytes());
    out.put_slice(b": ");
    // A field value cannot hold a line break; `event` and `id` never do in what we emit, but
    // dropping them keeps a stray one from splitting the frame.
    if memchr::memchr2(b'\r', b'\n', value.as_bytes()).is_some() {
        out.put_slice(value.replace(['\r', '\n'], "").as_bytes());
    } else {
        out.put_slice(value.as_bytes());
    }
    out.put_u8(b'\n');
}

fn lines(data: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let s = rest?;
        match memchr::memchr2(b'\r', b'\n', s.as_bytes()) {
            None => {
                rest = None;
                Some(s)
            }
            Some(i) => {
                let skip = if s[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&s[i + skip..]);
                Some(&s[..i])
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line_frame() {
        let f = frame(Some("E"), Some("7"), "{}");
        assert_eq!(&f[..], b"event: E\nid: 7\ndata: {}\n\n");
    }

    #[test]
    fn multi_line_payload_splits_on_every_line_break() {
        let f = frame(None, None, "a\nb\r\nc\rd");
        assert_eq!(&f[..], b"data: a\ndata: b\ndata: c\ndata: d\n\n");
    }

    #[test]
    fn a_json_frame_is_one_data_line_even_for_text_with_line_breaks() {
        let v = serde_json::json!({"text": "a\nb\r\nc"});
        let f = json_frame(Some("E"), Some("7"), &v);
        assert_eq!(
            &f[..],
            b"event: E\nid: 7\ndata: {\"text\":\"a\\nb\\r\\nc\"}\n\n"
        );
        assert_eq!(
            f,
            frame(Some("E"), Some("7"), &serde_json::to_string(&v).unwrap())
        );
    }

    #[test]
    fn a_hand_written_frame_is_a_json_frame() {
        let v = serde_json::json!({"text": "a\nb"});
        for (event, id) in [
            (Some("E"), Some("7")),
            (None, None),
            (Some("a\nb"), Some("\r1")),
        ] {
            let by_hand = json_frame_with(event, id, 0, |out| {
                serde_json::to_writer(out, &v).unwrap();
            });
            assert_eq!(by_hand, json_frame(event, id, &v));
        }
    }

    #[test]
    fn keepalive_and_retry() {
        assert!(keepalive().starts_with(b":"));
        assert_eq!(&retry(3000)[..], b"retry: 3000\n\n");
    }
}
