//! A small legacy agent server to try the gateway against (`gateway.toml` points at it).
//!
//! ```sh
//! cargo run --example legacy_upstream            # listens on 127.0.0.1:9000
//! cargo run --example legacy_upstream -- 127.0.0.1:9100
//! cargo run --example legacy_upstream -- 127.0.0.1:9100 --drop-feed-every 60
//! ```
//!
//! With `--drop-feed-every SECS` the event feed is also served through a relay on
//! `--feed-addr ADDR` (the server's port + 1 by default; point `events.source` at
//! `http://ADDR/events`) that closes every feed connection it carries every `SECS` seconds, as a
//! legacy server that restarts or a proxy that times out would. Each drop prints a
//! `feed dropped N connection(s)` line, so a soak can tell injected drops from real faults.
//!
//! With `--refuse-on-sigusr1 SECS` the server is reached through a front on the address given
//! that, on each SIGUSR1, closes every connection and refuses new ones for `SECS` seconds, as a
//! legacy server that is briefly down would; the server itself (its event ids) lives on.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

fn parse_addr(s: &str) -> std::io::Result<SocketAddr> {
    s.parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut addr = None;
    let mut drop_every = None;
    let mut feed_addr = None;
    let mut refuse_for = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--drop-feed-every" => {
                let secs: f64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|s: &f64| *s > 0.0)
                    .ok_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            "--drop-feed-every takes a positive number of seconds",
                        )
                    })?;
                drop_every = Some(Duration::from_secs_f64(secs));
            }
            "--refuse-on-sigusr1" => {
                let secs: f64 = args.next().and_then(|v| v.parse().ok()).ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "--refuse-on-sigusr1 takes a number of seconds",
                    )
                })?;
                refuse_for = Some(Duration::from_secs_f64(secs));
            }
            "--feed-addr" => feed_addr = Some(parse_addr(&args.next().unwrap_or_default())?),
            other => addr = Some(parse_addr(other)?),
        }
    }
    let addr = addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9000)));
    let (bound, task) = match refuse_for {
        None => wiregate::demo::legacy_upstream(addr).await?,
        Some(pause) => {
            let (inner, task) =
                wiregate::demo::legacy_upstream(SocketAddr::new(addr.ip(), 0)).await?;
            let front = TcpListener::bind(addr).await?;
            let bound = front.local_addr()?;
            tokio::spawn(refusing_front(front, inner, pause));
            (bound, task)
        }
    };
    println!("legacy upstream listening on http://{bound}/a2a");
    if let Some(every) = drop_every {
        let feed_addr =
            feed_addr.unwrap_or_else(|| SocketAddr::new(bound.ip(), bound.port().wrapping_add(1)));
        let listener = TcpListener::bind(feed_addr).await?;
        println!(
            "event feed dropped every {:.0} s at http://{}/events",
            every.as_secs_f64(),
            listener.local_addr()?
        );
        tokio::spawn(relay(listener, bound, every));
    }
    let _ = task.await;
    Ok(())
}

/// Relays connections to `target`; on each SIGUSR1 closes them all and refuses connections
/// (no listener) for `pause`.
async fn refusing_front(listener: TcpListener, target: SocketAddr, pause: Duration) {
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        .expect("SIGUSR1 can be handled");
    let (down_tx, _) = watch::channel(0u64);
    let mut listener = Some(listener);
    loop {
        let Some(l) = listener.as_ref() else {
            tokio::time::sleep(pause).await;
            listener = Some(
                TcpListener::bind(addr)
                    .await
                    .expect("the front's port is free again"),
            );
            println!("refusing no more");
            continue;
        };
        tokio::select! {
            accepted = l.accept() => {
                let Ok((mut inbound, _)) = accepted else { continue };
                let mut down = down_tx.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = down.changed() => {}
                    }
                });
            }
            _ = usr1.recv() => {
                listener = None;
                down_tx.send_modify(|g| *g += 1);
                println!("refusing connections for {:.1} s", pause.as_secs_f64());
            }
        }
    }
}

/// Relays connections to `target`, closing all of them every `every`.
async fn relay(listener: TcpListener, target: SocketAddr, every: Duration) {
    let (drop_tx, _) = watch::channel(0u64);
    let drop_tx = Arc::new(drop_tx);
    let open = Arc::new(AtomicU64::new(0));
    {
        let drop_tx = drop_tx.clone();
        let open = open.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            let mut drops = 0u64;
            loop {
                tick.tick().await;
                let n = open.load(Ordering::SeqCst);
                drop_tx.send_modify(|g| *g += 1);
                if n > 0 {
                    drops += 1;
                    println!(
                        "{} feed dropped {n} connection(s) (drop {drops})",
                        humantime::format_rfc3339_millis(std::time::SystemTime::now())
                    );
                } else {
                    println!(
                        "{} feed drop due, no connection open",
                        humantime::format_rfc3339_millis(std::time::SystemTime::now())
                    );
                }
            }
        });
    }
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let mut dropped = drop_tx.subscribe();
        let open = open.clone();
        tokio::spawn(async move {
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                return;
            };
            open.fetch_add(1, Ordering::SeqCst);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                _ = dropped.changed() => {}
            }
            open.fetch_sub(1, Ordering::SeqCst);
            // Both sockets close here: the reader sees its feed end mid-stream.
        });
    }
}
