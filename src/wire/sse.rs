//! Server-Sent Events framing (WHATWG HTML, "Server-sent events").
//!
//! A frame is `event:`, `id:`, one `data:` line per line of payload, and a blank line. Payload
//! lines are split on CR, LF and CRLF, as the parser on the other side will split them, so a
//! multi-line payload arrives whole. Frames are encoded once and shared by every subscriber.

use bytes::{BufMut, Bytes, BytesMut};

/// Encodes one event frame whose data is `data`, one `data:` line per line of it.
pub fn frame(event: Option<&str>, id: Option<&str>, data: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 64);
    head(&mut out, event, id);
    for line in lines(data) {
        out.put_slice(b"data: ");
        out.put_slice(line.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// Appends one event frame whose data is compact JSON that `write` appends: a value through
/// `serde_json::to_writer`, or bytes written by hand (the stream's hot path). Compact JSON holds
/// no raw line break (strings escape them), so it is one `data:` line.
#[inline]
pub fn write_json<B: BufMut>(
    out: &mut B,
    event: Option<&str>,
    id: Option<&str>,
    write: impl FnOnce(&mut B),
) {
    head(out, event, id);
    out.put_slice(b"data: ");
    write(out);
    out.put_slice(b"\n\n");
}

/// The length of [`write_json`]'s frame for `len` bytes of JSON: a buffer of exactly that size
/// becomes a `Bytes` without a second allocation (a buffer with room to spare needs one for its
/// shared header).
pub fn json_len(event: Option<&str>, id: Option<&str>, len: usize) -> usize {
    let field = |name: &str, v: Option<&str>| v.map_or(0, |v| name.len() + 3 + field_len(v));
    field("event", event) + field("id", id) + 6 + len + 2
}

/// A comment frame that keeps idle connections (and proxies) from timing out.
pub fn keepalive() -> Bytes {
    Bytes::from_static(b": keepalive\n\n")
}

/// Tells the client how long to wait before reconnecting.
pub fn retry(ms: u64) -> Bytes {
    Bytes::from(format!("retry: {ms}\n\n"))
}

/// The bytes [`head`] writes of a field's value: the value without its line breaks.
fn field_len(value: &str) -> usize {
    value.len() - memchr::memchr2_iter(b'\r', b'\n', value.as_bytes()).count()
}

/// The `event:` and `id:` lines.
fn head<B: BufMut>(out: &mut B, event: Option<&str>, id: Option<&str>) {
    for (name, value) in [("event", event), ("id", id)] {
        if let Some(value) = value {
            out.put_slice(name.as_bytes());
            out.put_slice(b": ");
            // A field value cannot hold a line break; `event` and `id` never do in what we
            // emit, but dropping them keeps a stray one from splitting the frame.
            match memchr::memchr2(b'\r', b'\n', value.as_bytes()) {
                None => out.put_slice(value.as_bytes()),
                Some(_) => out.put_slice(value.replace(['\r', '\n'], "").as_bytes()),
            }
            out.put_u8(b'\n');
        }
    }
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
        for (event, id) in [
            (Some("E"), Some("7")),
            (None, None),
            (Some("a\nb"), Some("\r1")),
        ] {
            let mut out = Vec::new();
            write_json(&mut out, event, id, |o| {
                serde_json::to_writer(o, &v).unwrap()
            });
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(out, frame(event, id, &json));
            assert_eq!(out.len(), json_len(event, id, json.len()));
        }
        let mut out = BytesMut::new();
        write_json(&mut out, Some("E"), Some("7"), |o| o.put_slice(b"{}"));
        assert_eq!(&out[..], b"event: E\nid: 7\ndata: {}\n\n");
    }

    #[test]
    fn keepalive_and_retry() {
        assert!(keepalive().starts_with(b":"));
        assert_eq!(&retry(3000)[..], b"retry: 3000\n\n");
    }
}
