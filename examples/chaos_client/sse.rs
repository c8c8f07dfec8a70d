//! Reading an SSE body frame by frame, and keeping one stream's ids in order across resumes.

use std::time::Duration;

use serde_json::Value;

/// One SSE frame, as the gateway writes them.
#[derive(Debug, Default)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl Frame {
    fn parse(text: &str) -> Frame {
        let mut f = Frame::default();
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => f.id = Some(value.to_owned()),
                "event" => f.event = Some(value.to_owned()),
                "data" => {
                    if !f.data.is_empty() {
                        f.data.push('\n');
                    }
                    f.data.push_str(value);
                }
                _ => {}
            }
        }
        f
    }

    /// Keepalive comments and empty frames carry nothing.
    pub fn is_empty(&self) -> bool {
        self.id.is_none() && self.event.is_none() && self.data.is_empty()
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// How a read ended when it did not give a frame.
#[derive(Debug)]
pub enum End {
    /// The server ended the body.
    Closed,
    /// The connection failed.
    #[allow(dead_code, reason = "read through Debug, in the problem reports")]
    Broken(String),
    /// No byte for this long, not even a keepalive.
    Silent(Duration),
}

/// An SSE body being read.
pub struct Body {
    resp: reqwest::Response,
    buf: Vec<u8>,
    stall: Duration,
}

impl Body {
    pub fn new(resp: reqwest::Response, stall: Duration) -> Self {
        Body {
            resp,
            buf: Vec::new(),
            stall,
        }
    }

    /// The next frame that carries something.
    pub async fn next(&mut self) -> Result<Frame, End> {
        loop {
            if let Some(end) = memchr::memmem::find(&self.buf, b"\n\n") {
                let text = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                let f = Frame::parse(&text);
                if !f.is_empty() {
                    return Ok(f);
                }
                continue;
            }
            match tokio::time::timeout(self.stall, self.resp.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buf.extend_from_slice(&bytes),
                Ok(Ok(None)) => return Err(End::Closed),
                Ok(Err(e)) => return Err(End::Broken(e.to_string())),
                Err(_) => return Err(End::Silent(self.stall)),
            }
        }
    }
}

/// What a frame means for a stream whose ids must run on by one.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The next id.
    Next(u64),
    /// A `gap` frame: the gateway says events were missed.
    Gap,
    /// An id at or below the last one.
    Repeat { id: u64, last: u64 },
    /// An id that skips some without a `gap` frame.
    Skip { id: u64, last: u64 },
    /// A frame without a numeric id, or with data that is not JSON.
    Bad(String),
}

/// The ids one client has had of one stream, across its resumes.
#[derive(Default)]
pub struct Order {
    pub last: Option<u64>,
    after_gap: bool,
}

impl Order {
    pub fn step(&mut self, f: &Frame) -> Step {
        if f.event.as_deref() == Some("gap") {
            self.after_gap = true;
            return Step::Gap;
        }
        let Some(id) = f.id.as_deref().and_then(|i| i.parse::<u64>().ok()) else {
            return Step::Bad(format!("no numeric id: {f:?}"));
        };
        if f.json().is_none() {
            return Step::Bad(format!("data is not JSON: {f:?}"));
        }
        let step = match self.last {
            Some(last) if id <= last => return Step::Repeat { id, last },
            Some(last) if id != last + 1 && !self.after_gap => Step::Skip { id, last },
            _ => Step::Next(id),
        };
        self.last = Some(id);
        self.after_gap = false;
        step
    }
}
