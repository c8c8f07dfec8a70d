//! One webhook's sender: each queued notification POSTed to the webhook, retried with backoff.
//!
//! Each try goes through the outbound client's [`Checked`]: the webhook's host resolved once,
//! every address it answers checked by the [`Policy`], and only those addresses connected to.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{Auth, Config, ATTEMPTS, BACKOFF, MAX_ANSWER, TIMEOUT_MS};
use crate::http::span::Kind;
use crate::outbound::{Checked, Error, Options, Policy};

/// What a webhook's sender needs of its configuration (not its queue's sending side, so the
/// queue closes when the configuration goes).
#[derive(Debug)]
pub(super) struct Target {
    task_id: String,
    url: String,
    auth: Option<Auth>,
    live: Arc<AtomicBool>,
}

impl Config {
    pub(super) fn without_queue(&self) -> Target {
        Target {
            task_id: self.task_id.clone(),
            url: self.url.clone(),
            auth: self.auth.clone(),
            live: self.live.clone(),
        }
    }
}

/// One webhook's sender: POSTs each queued notification, retrying with backoff, until the
/// webhook is deleted or its task's updates end. With `trace` (the request that made the
/// webhook recorded spans), each notification is an INTERNAL span of that trace, each POST of
/// it a CLIENT span under it.
pub(super) async fn deliver(
    guard: Policy,
    c: Target,
    mut rx: mpsc::Receiver<Bytes>,
    trace: Option<crate::http::span::Parent>,
) {
    let opts = Options::within(Duration::from_millis(TIMEOUT_MS), MAX_ANSWER);
    let mut dialer = Checked::new(&c.url, guard, opts);
    let authorization = c.auth.as_ref().map(|a| {
        format!("{} {}", a.scheme, a.credentials)
            .trim_end()
            .to_owned()
    });
    while let Some(body) = rx.recv().await {
        if !c.live.load(Ordering::Acquire) {
            return; // deleted: nothing more goes out
        }
        let notify = notify(&c, &mut dialer, authorization.as_deref(), &body);
        let outcome = match &trace {
            Some(parent) => {
                crate::http::scope::run_as(
                    parent.clone(),
                    Kind::Internal,
                    "push notification",
                    async {
                        let outcome = notify.await;
                        crate::http::scope::annotate(|s| {
                            s.set("wiregate.task_id", &*c.task_id);
                            s.set("wiregate.push.outcome", outcome);
                            if outcome != "delivered" {
                                s.fail(outcome);
                            }
                        });
                        outcome
                    },
                )
                .await
            }
            None => notify.await,
        };
        metrics::counter!("wiregate_a2a_push_total", "outcome" => outcome).increment(1);
    }
}

/// One notification to one webhook, tried up to `ATTEMPTS` times with backoff: how it ended.
async fn notify(
    c: &Target,
    dialer: &mut Checked,
    authorization: Option<&str>,
    body: &Bytes,
) -> &'static str {
    let mut wait = BACKOFF;
    let mut outcome = "failed";
    for attempt in 1..=ATTEMPTS {
        // Resolved and checked again before each try (a name may lead elsewhere by now), and
        // the try connects to the addresses checked, not to a second lookup's.
        match dialer.post(body, authorization).await {
            Ok(a) if a.status.is_success() => {
                outcome = "delivered";
                break;
            }
            Err(Error::Refused(e)) => {
                tracing::warn!(webhook = %crate::util::redact::url(&c.url), task = %c.task_id, error = %crate::util::redact::scrub(&e.to_string(), &c.url), "webhook refused");
                outcome = "refused";
                break;
            }
            Ok(a) => {
                tracing::debug!(webhook = %crate::util::redact::url(&c.url), status = %a.status, attempt, "webhook refused a notification")
            }
            Err(e) => {
                tracing::debug!(webhook = %crate::util::redact::url(&c.url), error = %e, attempt, "webhook unreachable")
            }
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::outbound::policy::{answering, is_blocked, Lookup, Resolver};

    /// The address the test lets a webhook reach: a loopback address other than 127.0.0.1.
    const CHECKED: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
    /// The address a rebinding name answers with on its second lookup.
    const INSIDE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

    /// The block list, but for [`CHECKED`] (a stand-in for a public address).
    fn blocked_but_checked(ip: IpAddr) -> bool {
        ip != IpAddr::V4(CHECKED) && is_blocked(ip)
    }

    /// Accepts connections on `l` (counted in `connections`) and answers each request on them
    /// `200`, counting requests.
    fn answer_ok(l: TcpListener, requests: Arc<AtomicUsize>, connections: Arc<AtomicUsize>) {
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let requests = requests.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        // Every request of the test has a body in one piece after its head.
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        if buf.len() < end + 4 + len {
                            continue;
                        }
                        buf.drain(..end + 4 + len);
                        requests.fetch_add(1, Ordering::SeqCst);
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if s.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
    }

    fn target(url: String) -> Target {
        Target {
            task_id: "task".into(),
            url,
            auth: None,
            live: Arc::new(AtomicBool::new(true)),
        }
    }

    /// A name that answers an allowed address to one lookup and 127.0.0.1 to the next: each
    /// try looks it up once and connects to what that lookup answered, so the notification
    /// reaches the checked address, the next one is refused, and 127.0.0.1 sees no connection.
    #[tokio::test]
    async fn a_rebinding_name_never_leads_a_delivery_to_its_second_answer() {
        let inside = TcpListener::bind((INSIDE, 0)).await.unwrap();
        let port = inside.local_addr().unwrap().port();
        let checked = TcpListener::bind((CHECKED, port)).await.unwrap();
        let served = Arc::new(AtomicUsize::new(0));
        answer_ok(checked, served.clone(), Arc::default());

        let lookups = Arc::new(AtomicUsize::new(0));
        let answers = answering(vec![vec![CHECKED.into()], vec![INSIDE.into()]]);
        let counted = lookups.clone();
        let resolver: Resolver = Arc::new(move |host, port| -> Lookup {
            counted.fetch_add(1, Ordering::SeqCst);
            answers(host, port)
        });
        let guard = Policy::with(false, resolver, blocked_but_checked);
        let c = target(format!("http://rebinding.test:{port}/hook"));
        let opts = Options::within(Duration::from_secs(10), MAX_ANSWER);
        let mut dialer = Checked::new(&c.url, guard, opts);
        let body = Bytes::from_static(b"{\"n\":1}");

        assert_eq!(notify(&c, &mut dialer, None, &body).await, "delivered");
        assert_eq!(lookups.load(Ordering::SeqCst), 1, "one lookup per try");
        assert_eq!(served.load(Ordering::SeqCst), 1);
        assert_eq!(notify(&c, &mut dialer, None, &body).await, "refused");
        assert_eq!(lookups.load(Ordering::SeqCst), 2);
        assert_eq!(served.load(Ordering::SeqCst), 1);
        let reached = tokio::time::timeout(Duration::from_millis(300), inside.accept()).await;
        assert!(reached.is_err(), "127.0.0.1 was connected to: {reached:?}");
    }

    /// The whole sender, through its queue: what it delivers goes to the checked address.
    #[tokio::test]
    async fn the_sender_dials_the_checked_address_not_the_name() {
        let inside = TcpListener::bind((INSIDE, 0)).await.unwrap();
        let port = inside.local_addr().unwrap().port();
        let checked = TcpListener::bind((CHECKED, port)).await.unwrap();
        let (served, connections) = (Arc::new(AtomicUsize::new(0)), Arc::default());
        answer_ok(checked, served.clone(), Arc::clone(&connections));
        // The same allowed answer each time: the client (and its connection) is kept.
        let guard = Policy::with(
            false,
            answering(vec![vec![CHECKED.into()]]),
            blocked_but_checked,
        );
        let (tx, rx) = mpsc::channel(4);
        for n in 0..3 {
            tx.send(Bytes::from(format!("{{\"n\":{n}}}")))
                .await
                .unwrap();
        }
        drop(tx);
        let c = target(format!("http://rebinding.test:{port}/hook"));
        tokio::time::timeout(Duration::from_secs(10), deliver(guard, c, rx, None))
            .await
            .unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 3);
        assert_eq!(
            connections.load(Ordering::SeqCst),
            1,
            "one kept-alive connection"
        );
        let reached = tokio::time::timeout(Duration::from_millis(200), inside.accept()).await;
        assert!(reached.is_err(), "127.0.0.1 was connected to: {reached:?}");
    }
}
