//! HTTP/1.1 pipelining to an upstream that allows it (`upstreams[].pipeline = N`, off by
//! default): calls queue on a few long-lived connections, and the calls ready in the same tick
//! of the runtime go to the upstream in one `write`, their answers read back as they come
//! (several in one `read` when the upstream wrote them together).
//!
//! Why: the pooled path ([`super::Pool::post`]) already makes a plain proxy's
//! minimum of system calls per call, one write and one read to the upstream; only putting
//! several calls in one write and one read goes below it.
//!
//! How: each connection ("lane") is a task that owns its socket, a queue of calls (an `mpsc`
//! channel) and the FIFO of calls written and not answered yet (at most `depth`). The lane's
//! count of its calls bounds the queue: at most `2 × depth` calls, written or queued (the
//! count is kept anyway to pick the least loaded lane, and a bounded channel's semaphore
//! measured dearer per call: docs/performance.md). A caller lays its request out itself, queues it with the instant it is
//! due, and waits on a `oneshot` for its answer within its own timeout. Answers are matched to
//! calls by their order alone (RFC 9112 §9.3.2: a server answers pipelined requests in the
//! order it received them), so an answer can only ever go to the call it answers.
//!
//! Failures, each tested over real sockets in `tests/rpc/pipeline.rs`:
//! - a queue full (the least loaded lane holds `2 × depth` calls): the call takes the pooled
//!   path, so nothing is buffered without bound and no call waits for a slot;
//! - the upstream closes or resets the connection: every call written and not answered fails
//!   with the error the pooled path gives (502, `UpstreamUnreachable`); a call none of whose
//!   bytes were written goes once more on a new connection (a `POST` is retried only then);
//! - an answer that ends the connection (`Connection: close`, HTTP/1.0): the calls written
//!   behind it were not processed (RFC 9112 §9.6), so they go once more on a new connection;
//! - a call that times out at the head of a connection (head-of-line: the calls behind it wait
//!   at most until then): its caller gets the 504, the connection is dropped (its answer could
//!   come later and must not be read as the next call's), the calls written behind it fail
//!   (502) and those not written go on a new connection;
//! - an answer that is not valid HTTP/1.1 or too large: that call gets the pooled path's error,
//!   the connection is dropped and the calls behind it fail as above.
//!
//! ACKs: an answer read is acknowledged within [`ACK_DELAY`] even when no request follows to
//! carry the ACK ([`Open::ack_now`]): an upstream with Nagle on otherwise holds its next
//! answers for Linux's delayed ACK, 40 ms in which every call on the lane waits (the p99 at 32
//! connections shows it).
//!
//! Limits: plain `http://` only (validated), a `POST` with a body read whole like the pooled
//! path; one lane per runtime worker (per-core workers each with their own), each call on the
//! least loaded lane, and a slow call holds up to `depth` calls behind it on its lane for at
//! most its own timeout.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Sleep};

use super::h1::{self, Chunked, Framing, Parsed};
use answers::next_answer;

mod answers;

/// Read buffer reserved before each read.
const READ_CHUNK: usize = 16 * 1024;
/// A lane's connection unused for this long is replaced rather than written to.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How many times a call is sent at most (a resend only when none of it was written, or the
/// upstream said it would not process it).
const MAX_SENDS: u8 = 2;
/// How long an answer read stays unacknowledged at most when no request follows to carry the
/// ACK ([`Open::ack_now`]); tokio's timer rounds it up to its 1 ms tick.
const ACK_DELAY: Duration = Duration::from_millis(1);

/// What a call's waiter gets: the pooled exchange's answer or error.
pub(crate) type Outcome = Result<h1::Answer, h1::Error>;

/// The pipelined connections of one upstream, started on first use (inside the runtime).
#[derive(Debug)]
pub(crate) struct Pipeline {
    addr: String,
    depth: usize,
    limit: usize,
    /// The lanes of each worker slot ([`crate::util::worker::slot`]), each started on its
    /// first call on the runtime that made it: a per-core worker's calls use lanes of its own.
    lanes: Box<[OnceLock<Box<[Lane]>>]>,
}

/// One lane's queue, and how many calls it holds (queued, written or not).
#[derive(Debug)]
struct Lane {
    tx: mpsc::UnboundedSender<Call>,
    load: Arc<AtomicUsize>,
}

/// A call queued on a lane.
#[derive(Debug)]
struct Call {
    /// The whole request, laid out by `h1::lay_out`.
    request: Vec<u8>,
    due: Instant,
    reply: oneshot::Sender<Outcome>,
    /// Times it was written (whole or in part).
    sends: u8,
}

impl Pipeline {
    /// Pipelining to `addr` (`host:port`), at most `depth` calls waiting per connection,
    /// answers' bodies at most `limit` bytes.
    pub(crate) fn new(addr: String, depth: usize, limit: usize) -> Self {
        Pipeline {
            addr,
            depth: depth.max(1),
            limit,
            lanes: (0..crate::util::worker::slots())
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// Queues a call on the least loaded lane; `None` when that lane's queue is full (the
    /// caller then takes the pooled path). Call inside the runtime: the first call starts the
    /// lanes.
    pub(crate) fn submit(
        &self,
        request: Vec<u8>,
        due: Instant,
    ) -> Option<oneshot::Receiver<Outcome>> {
        let lanes = self.lanes[crate::util::worker::slot()].get_or_init(|| self.start());
        let lane = lanes
            .iter()
            .min_by_key(|l| l.load.load(Ordering::Relaxed))?;
        // At most `depth` calls waiting on the connection and `depth` more queued.
        if lane.load.fetch_add(1, Ordering::Relaxed) >= 2 * self.depth {
            lane.load.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let (reply, rx) = oneshot::channel();
        let call = Call {
            request,
            due,
            reply,
            sends: 0,
        };
        if lane.tx.send(call).is_err() {
            // The lane's task ended.
            lane.load.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(rx)
    }

    /// One lane per worker of the current runtime: the lanes' tasks end when this pipeline is
    /// dropped.
    fn start(&self) -> Box<[Lane]> {
        let workers = tokio::runtime::Handle::current().metrics().num_workers();
        (0..workers.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                let load = Arc::new(AtomicUsize::new(0));
                let task = Task {
                    addr: self.addr.clone(),
                    depth: self.depth,
                    limit: self.limit,
                    rx,
                    load: load.clone(),
                    pending: VecDeque::new(),
                };
                tokio::spawn(task.run());
                Lane { tx, load }
            })
            .collect()
    }
}

/// A lane's task: its queue, the calls taken from it and not written yet.
struct Task {
    addr: String,
    depth: usize,
    limit: usize,
    rx: mpsc::UnboundedReceiver<Call>,
    load: Arc<AtomicUsize>,
    /// Taken from the queue (or to be sent once more), not written yet; oldest first.
    pending: VecDeque<Call>,
}

/// A lane's open connection.
struct Open {
    tcp: TcpStream,
    /// Read and not consumed.
    read: BytesMut,
    /// The batch being written, and how much of it is.
    out: Vec<u8>,
    sent: usize,
    /// Written (in part or whole) and not answered, oldest first, each with where it lies in
    /// `out` while it is not written whole.
    waiting: VecDeque<(Call, Option<(usize, usize)>)>,
    /// The head of the answer being read, when it is complete and its body is not.
    head: Option<(Parsed, Chunked)>,
    last_used: std::time::Instant,
    /// Answers were read since the last write and more are awaited: the ACK is due by the ACK
    /// timer unless a write carries it first.
    unacked: bool,
}

/// What woke a lane.
enum Event {
    Readable,
    Writable,
    Queued(Option<Call>),
    Due,
    Ack,
}

impl Task {
    async fn run(mut self) {
        let mut conn: Option<Open> = None;
        let mut timer = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
        let mut ack_timer = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
        loop {
            self.take_queued(conn.as_ref().map_or(0, |c| c.waiting.len()));
            let idle = conn.as_ref().is_none_or(|c| c.waiting.is_empty());
            if idle && self.pending.is_empty() {
                // Nothing to do: wait for a call (the connection stays open for the next ones).
                match self.rx.recv().await {
                    Some(call) => {
                        self.pending.push_back(call);
                        // Let the other calls of this tick queue too, so they share a write.
                        tokio::task::yield_now().await;
                        continue;
                    }
                    None => return,
                }
            }
            if idle && !self.pending.is_empty() && !conn.as_ref().is_some_and(Open::reusable) {
                conn = self.connect().await;
                if conn.is_none() {
                    continue;
                }
            }
            let c = conn.as_mut().expect("a connection while calls wait");
            let was_empty = c.waiting.is_empty();
            self.batch(c);
            if was_empty {
                if let Some((head, _)) = c.waiting.front() {
                    timer.as_mut().reset(head.due);
                }
            }
            if c.sent < c.out.len() {
                if let Err(e) = c.write_some() {
                    self.broken(conn.take(), || h1::Error::NotSent(clone(&e)));
                    continue;
                }
            }
            let room = c.waiting.len() + self.pending.len() < self.depth;
            let event = tokio::select! {
                biased;
                r = c.tcp.readable(), if !c.waiting.is_empty() => match r {
                    Ok(()) => Event::Readable,
                    Err(_) => Event::Readable,
                },
                _ = c.tcp.writable(), if c.sent < c.out.len() => Event::Writable,
                call = self.rx.recv(), if room => Event::Queued(call),
                () = &mut timer, if !c.waiting.is_empty() => Event::Due,
                () = &mut ack_timer, if c.unacked => Event::Ack,
            };
            match event {
                Event::Readable => self.readable(&mut conn, &mut ack_timer),
                Event::Writable => {}
                Event::Ack => {
                    c.unacked = false;
                    c.ack_now();
                }
                Event::Queued(Some(call)) => {
                    self.pending.push_back(call);
                    tokio::task::yield_now().await;
                }
                Event::Queued(None) => return,
                Event::Due => self.due(&mut conn, &mut timer),
            }
        }
    }

    /// Reads what the upstream sent and hands out the answers it completes; drops the
    /// connection when the upstream closed it or it must go, and sets the ACK timer when
    /// answers were read and more are awaited.
    #[inline]
    fn readable(&mut self, conn: &mut Option<Open>, ack_timer: &mut Pin<Box<Sleep>>) {
        let c = conn.as_mut().expect("open");
        c.read.reserve(READ_CHUNK);
        match c.tcp.try_read_buf(&mut c.read) {
            Ok(0) => {
                let c = conn.take().expect("open");
                self.closed(c);
            }
            Ok(_) => {
                if !self.answers(c) {
                    self.broken(conn.take(), || h1::Error::Closed);
                } else if !c.waiting.is_empty() && !c.unacked {
                    c.unacked = true;
                    ack_timer.as_mut().reset(Instant::now() + ACK_DELAY);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => self.broken(conn.take(), || h1::Error::Read(clone(&e))),
        }
    }

    /// The head call's timer fired: the connection is dropped when that call is due, else the
    /// timer is moved to when it is.
    #[inline]
    fn due(&mut self, conn: &mut Option<Open>, timer: &mut Pin<Box<Sleep>>) {
        let head_due = conn
            .as_ref()
            .and_then(|c| c.waiting.front())
            .map(|(h, _)| h.due);
        match head_due {
            Some(due) if due <= Instant::now() => {
                // The head's caller has its 504; its answer may still come and must not be read
                // as the next call's.
                self.broken(conn.take(), || {
                    h1::Error::Read(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "a call ahead of this one on the pipelined connection timed out",
                    ))
                });
            }
            Some(due) => timer.as_mut().reset(due),
            None => {}
        }
    }

    /// Takes queued calls while the lane has room (`waiting` written and not answered).
    fn take_queued(&mut self, waiting: usize) {
        while waiting + self.pending.len() < self.depth {
            match self.rx.try_recv() {
                Ok(call) => self.pending.push_back(call),
                Err(_) => break,
            }
        }
    }

    /// A new connection for the pending calls; on failure they get the pooled path's error
    /// (a connect error, or their 504 when they are due before it is open).
    async fn connect(&mut self) -> Option<Open> {
        let due = self.pending.iter().map(|c| c.due).min()?;
        match tokio::time::timeout_at(due, TcpStream::connect(&self.addr)).await {
            Ok(Ok(tcp)) => {
                let _ = tcp.set_nodelay(true);
                Some(Open {
                    tcp,
                    read: BytesMut::new(),
                    out: Vec::new(),
                    sent: 0,
                    waiting: VecDeque::new(),
                    head: None,
                    last_used: std::time::Instant::now(),
                    unacked: false,
                })
            }
            Ok(Err(e)) => {
                for call in std::mem::take(&mut self.pending) {
                    self.answer(
                        call,
                        Err(h1::Error::Connect {
                            addr: self.addr.clone(),
                            source: clone(&e),
                        }),
                    );
                }
                None
            }
            Err(_) => {
                // Those due have their 504 from their callers; the others try again.
                let now = Instant::now();
                let (late, rest): (VecDeque<Call>, VecDeque<Call>) =
                    std::mem::take(&mut self.pending)
                        .into_iter()
                        .partition(|c| c.due <= now);
                self.pending = rest;
                for call in late {
                    self.answer(call, Err(h1::Error::Closed));
                }
                None
            }
        }
    }

    /// Lays the pending calls out as the next batch, once the last one is written whole.
    fn batch(&mut self, c: &mut Open) {
        if c.sent < c.out.len() {
            return;
        }
        c.out.clear();
        c.sent = 0;
        while c.waiting.len() < self.depth {
            let Some(mut call) = self.pending.pop_front() else {
                break;
            };
            if call.reply.is_closed() {
                // Its caller gave up (timed out, or its client left): not sent at all.
                self.load.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            let start = c.out.len();
            // Copied: the request is kept until answered, to be sent again if it must be.
            c.out.extend_from_slice(&call.request);
            call.sends += 1;
            c.waiting.push_back((call, Some((start, c.out.len()))));
        }
        c.last_used = std::time::Instant::now();
    }

    /// Parses and hands out the answers read; `false` when the connection must be dropped
    /// (an invalid answer, an answer that ends it, or bytes nobody asked for).
    fn answers(&mut self, c: &mut Open) -> bool {
        loop {
            let Some(head_call) = c.waiting.front() else {
                // Bytes no call asked for: the connection's state is unknown.
                return c.read.is_empty();
            };
            if head_call.1.is_some() {
                // An answer to a request not written whole yet: not HTTP.
                return false;
            }
            match next_answer(&mut c.read, &mut c.head, self.limit) {
                Ok(None) => return true,
                Ok(Some((answer, ends))) => {
                    let reusable = answer.reusable;
                    let (call, _) = c.waiting.pop_front().expect("a head");
                    self.answer(call, Ok(answer));
                    if !reusable {
                        if ends {
                            // Declared before the calls behind it were read: not processed.
                            self.requeue(c);
                        }
                        return false;
                    }
                }
                Err(e) => {
                    let (call, _) = c.waiting.pop_front().expect("a head");
                    self.answer(call, Err(e));
                    return false;
                }
            }
        }
    }

    /// The upstream closed the connection: a close-delimited answer ends here; the calls
    /// written behind an answer that said it ends the connection are not processed.
    fn closed(&mut self, mut c: Open) {
        if let Some((parsed, _)) = c.head.take() {
            let ends = parsed.ends;
            if parsed.framing == Framing::Close {
                if let Some((call, _)) = c.waiting.pop_front() {
                    let body = c.read.split().freeze();
                    let outcome = match body.len() > self.limit {
                        true => Err(h1::Error::TooLarge {
                            status: parsed.status,
                            limit: self.limit,
                        }),
                        false => Ok(h1::Answer {
                            status: parsed.status,
                            body,
                            reusable: false,
                        }),
                    };
                    self.answer(call, outcome);
                    if ends {
                        self.requeue(&mut c);
                    }
                }
            }
        }
        self.broken(Some(c), || h1::Error::Closed);
    }

    /// Drops a connection: the calls written on it (whole or in part) fail with `error`;
    /// those none of whose bytes were written go first in line for the next connection.
    fn broken(&mut self, c: Option<Open>, error: impl Fn() -> h1::Error) {
        let Some(mut c) = c else { return };
        let mut unwritten = VecDeque::new();
        for (mut call, span) in std::mem::take(&mut c.waiting) {
            match span {
                Some((start, _)) if start >= c.sent => {
                    call.sends -= 1;
                    unwritten.push_back(call);
                }
                _ => self.answer(call, Err(error())),
            }
        }
        while let Some(call) = unwritten.pop_back() {
            self.pending.push_front(call);
        }
    }

    /// Puts the calls written on `c` and not answered back first in line (the upstream said
    /// it would not process them), or fails them when they were sent as often as allowed.
    fn requeue(&mut self, c: &mut Open) {
        let mut again = VecDeque::new();
        for (call, _) in std::mem::take(&mut c.waiting) {
            match call.sends < MAX_SENDS {
                true => again.push_back(call),
                false => self.answer(call, Err(h1::Error::Closed)),
            }
        }
        while let Some(call) = again.pop_back() {
            self.pending.push_front(call);
        }
    }

    /// Hands a call its outcome (its caller may have gone: then nobody reads it).
    fn answer(&self, call: Call, outcome: Outcome) {
        self.load.fetch_sub(1, Ordering::Relaxed);
        let _ = call.reply.send(outcome);
    }
}

impl Open {
    /// Still usable for a new batch: not idle too long, nothing pending on it, not even an EOF
    /// (no system call unless the reactor saw it readable).
    fn reusable(&self) -> bool {
        let mut probe = [0u8; 1];
        self.last_used.elapsed() < IDLE_TIMEOUT
            && self.read.is_empty()
            && matches!(self.tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Acknowledges what was read now instead of up to 40 ms later (Linux's delayed ACK on a
    /// connection it sees as interactive), because an upstream that leaves Nagle on holds each
    /// further small answer until its last one is acknowledged: pipelined answers flushed one
    /// by one (hyper's default) then wait for this ACK whenever no request follows to carry
    /// it, and every call on the lane waits with them. Only when a read stayed unacknowledged
    /// for [`ACK_DELAY`]: an ACK after every read costs a system call, a segment, and the
    /// upstream's batching of its answers (each then goes out alone).
    fn ack_now(&self) {
        #[cfg(target_os = "linux")]
        let _ = socket2::SockRef::from(&self.tcp).set_tcp_quickack(true);
    }

    /// Writes what the socket takes of the batch now; any error but `WouldBlock` is the
    /// connection's end.
    #[inline]
    fn write_some(&mut self) -> io::Result<()> {
        match self.tcp.try_write(&self.out[self.sent..]) {
            Ok(n) => {
                // The segment carries the ACK of everything read so far.
                self.unacked = false;
                self.advance(n);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `n` more bytes of the batch written; calls written whole are marked so.
    fn advance(&mut self, n: usize) {
        self.sent += n;
        for (_, span) in self.waiting.iter_mut().rev() {
            match span {
                Some((_, end)) if *end <= self.sent => *span = None,
                Some(_) => {}
                None => break,
            }
        }
    }
}

/// An I/O error for each call that failed by it (`io::Error` is not `Clone`).
fn clone(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}
