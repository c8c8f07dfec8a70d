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
    if value.contains(['\r', '\n']) {
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
        match s.find(['\r', '\n']) {
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
    fn keepalive_and_retry() {
        assert!(keepalive().starts_with(b":"));
        assert_eq!(&retry(3000)[..], b"retry: 3000\n\n");
    }
}
