//! Leases: which replica runs a context's sid. A lease is a key with an expiry (`lease_ms`),
//! set only when free and renewed by its holder at a third of that; a replica that dies stops
//! renewing, and the next call for the context, wherever it lands, takes the lease over, or
//! sooner a replica's sweep does ([`orphans`]) when the context had tasks open.

use std::sync::{Arc, Weak};

use redis::aio::ConnectionManager;
use redis::AsyncCommands;

use super::{keys, Link};
use crate::model::error::GatewayError;

/// How soon a renewal that failed (Redis did not answer) is tried again.
const RETRY_SOON: std::time::Duration = std::time::Duration::from_millis(50);

/// Renews only a lease this replica still holds.
const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
/// Releases only a lease this replica still holds.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) else return 0 end";

/// Renews a lease this replica holds, or takes it when it is free.
const HOLD: &str = "local v = redis.call('GET', KEYS[1]) \
     if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end \
     if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end \
     return 0";

/// Holds the lease `key` for this replica if it is free or already ours: `true` when this
/// replica holds it now.
pub(crate) async fn hold(link: &Link, key: &str) -> Result<bool, GatewayError> {
    let mut conn = link.conn()?;
    let held: i64 = redis::cmd("EVAL")
        .arg(HOLD)
        .arg(1)
        .arg(key)
        .arg(value(link))
        .arg(link.lease.as_millis() as u64)
        .query_async(&mut conn)
        .await
        .map_err(|e| link.failed(&e))?;
    Ok(held == 1)
}

/// Who holds a context's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Holder {
    /// This replica (it just took the lease, or held it already).
    Me,
    /// Another replica, reachable at its `advertise` URL.
    Other {
        /// Its node id.
        node: String,
        /// Its `cluster.advertise` (empty when it has none).
        advertise: String,
    },
}

/// The lease's value for this replica.
fn value(link: &Link) -> String {
    format!("{} {}", link.node_id, link.advertise)
}

/// Parses a lease value (pure).
pub(crate) fn parse_holder(v: &str, me: &str) -> Holder {
    let (node, advertise) = v.split_once(' ').unwrap_or((v, ""));
    match node == me {
        true => Holder::Me,
        false => Holder::Other {
            node: node.to_owned(),
            advertise: advertise.to_owned(),
        },
    }
}

/// Takes a context's lease when it is free (or already ours); says who holds it otherwise.
pub(crate) async fn claim(link: &Link, context_id: &str) -> Result<Holder, GatewayError> {
    let mut conn = link.conn()?;
    let key = keys::owner(context_id);
    let took: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(value(link))
        .arg("NX")
        .arg("PX")
        .arg(link.lease.as_millis() as u64)
        .query_async(&mut conn)
        .await
        .map_err(|e| link.failed(&e))?;
    if took.is_some() {
        return Ok(Holder::Me);
    }
    let held: Option<String> = conn.get(&key).await.map_err(|e| link.failed(&e))?;
    match held {
        Some(v) => Ok(parse_holder(&v, &link.node_id)),
        // Expired between the two commands: try once more.
        None => Box::pin(claim(link, context_id)).await,
    }
}

/// Holds a context's lease while `alive` says the context is still this replica's, renewing it
/// at a third of `lease_ms`; records sid's session id for whoever takes over; releases the
/// lease when the context is gone.
pub(crate) fn keep<T: Send + Sync + 'static>(
    link: Arc<Link>,
    context_id: String,
    alive: Weak<T>,
    session: impl Fn(&T) -> Option<String> + Send + 'static,
) {
    crate::util::background::spawn(async move {
        let key = keys::owner(&context_id);
        let mine = value(&link);
        let every = link.lease / 3;
        let mut recorded: Option<String> = None;
        // Whether the context is in [`keys::CONTEXTS`], where a sweep finds it if this
        // replica dies.
        let mut listed = false;
        loop {
            let Some(ctx) = alive.upgrade() else { break };
            let now_session = session(&ctx);
            drop(ctx);
            let mut conn = link.conn_anyway();
            let renewed = renew(&link, &mut conn, &key, &mine).await;
            match renewed {
                Ok(1) => {}
                Ok(_) => {
                    if retake(&link, &mut conn, &key, &mine, &context_id).await {
                        // A Redis that came back empty lost the session too: record it again.
                        recorded = None;
                        listed = false;
                    }
                }
                Err(e) => {
                    link.failed(&e);
                    // Retried soon, so that when Redis returns this replica holds its
                    // contexts again before another replica's call could claim them.
                    tokio::time::sleep(RETRY_SOON).await;
                    continue;
                }
            }
            record(
                &mut conn,
                &context_id,
                &mut listed,
                &mut recorded,
                now_session,
            )
            .await;
            tokio::time::sleep(every).await;
        }
        give_back(&link, &key, &mine).await;
    });
}

/// Renews the lease `key` if this replica (`mine`) still holds it: 1 when it did.
async fn renew(
    link: &Link,
    conn: &mut ConnectionManager,
    key: &str,
    mine: &str,
) -> redis::RedisResult<i64> {
    redis::cmd("EVAL")
        .arg(RENEW)
        .arg(1)
        .arg(key)
        .arg(mine)
        .arg(link.lease.as_millis() as u64)
        .query_async(conn)
        .await
}

/// Takes a lost lease again if it is free: `true` when this replica holds it now; logs an
/// error when another replica does.
async fn retake(
    link: &Link,
    conn: &mut ConnectionManager,
    key: &str,
    mine: &str,
    context_id: &str,
) -> bool {
    // Lost (expired while Redis was away): take it again if it is free.
    let took: redis::RedisResult<Option<String>> = redis::cmd("SET")
        .arg(key)
        .arg(mine)
        .arg("NX")
        .arg("PX")
        .arg(link.lease.as_millis() as u64)
        .query_async(conn)
        .await;
    match took {
        Ok(Some(_)) => true,
        _ => {
            tracing::error!(context = %context_id,
                "another replica took over this context's lease");
            false
        }
    }
}

/// Lists the context in [`keys::CONTEXTS`] unless it is `listed`, and records its sid session
/// `now_session` unless it is the one `recorded`.
async fn record(
    conn: &mut ConnectionManager,
    context_id: &str,
    listed: &mut bool,
    recorded: &mut Option<String>,
    now_session: Option<String>,
) {
    if !*listed {
        let added: redis::RedisResult<i64> = conn.sadd(keys::CONTEXTS, context_id).await;
        *listed = added.is_ok();
    }
    if now_session.is_some() && now_session != *recorded {
        let set: redis::RedisResult<()> = conn
            .set(
                keys::session(context_id),
                now_session.as_deref().unwrap_or(""),
            )
            .await;
        if set.is_ok() {
            *recorded = now_session;
        }
    }
}

/// Releases the lease `key` if this replica (`mine`) still holds it.
async fn give_back(link: &Link, key: &str, mine: &str) {
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg(RELEASE)
        .arg(1)
        .arg(key)
        .arg(mine)
        .query_async(&mut conn)
        .await;
}

/// Gives a lease back at once (a context this replica took over but cannot run).
pub(crate) async fn release(link: &Link, context_id: &str) {
    let Ok(mut conn) = link.conn() else { return };
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg(RELEASE)
        .arg(1)
        .arg(keys::owner(context_id))
        .arg(value(link))
        .query_async(&mut conn)
        .await;
}

/// Contexts in [`keys::CONTEXTS`] that no replica holds now (the lease lapsed), or whose lease
/// names this replica though it does not run them (it restarted): each is for this replica to
/// take over if it had tasks open. `runs_here` says which contexts this replica runs.
pub(crate) async fn orphans(
    link: &Link,
    runs_here: impl Fn(&str) -> bool,
) -> Result<Vec<String>, GatewayError> {
    let mut conn = link.conn()?;
    let listed: Vec<String> = conn
        .smembers(keys::CONTEXTS)
        .await
        .map_err(|e| link.failed(&e))?;
    let others: Vec<String> = listed.into_iter().filter(|c| !runs_here(c)).collect();
    if others.is_empty() {
        return Ok(others);
    }
    let owner_keys: Vec<String> = others.iter().map(|c| keys::owner(c)).collect();
    let owners: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&owner_keys)
        .query_async(&mut conn)
        .await
        .map_err(|e| link.failed(&e))?;
    Ok(others
        .into_iter()
        .zip(owners)
        .filter(|(_, owner)| {
            owner
                .as_deref()
                .is_none_or(|v| parse_holder(v, &link.node_id) == Holder::Me)
        })
        .map(|(c, _)| c)
        .collect())
}

/// Takes a context out of [`keys::CONTEXTS`]: no replica runs it and it has no task open, so
/// no sweep need look at it again (a later call that runs it lists it again).
pub(crate) async fn unlist(link: &Link, context_id: &str) {
    let Ok(mut conn) = link.conn() else { return };
    let _: redis::RedisResult<i64> = conn.srem(keys::CONTEXTS, context_id).await;
}

/// The sid session a context last ran, if any replica recorded one.
pub(crate) async fn session(link: &Link, context_id: &str) -> Result<Option<String>, GatewayError> {
    let mut conn = link.conn()?;
    conn.get(keys::session(context_id))
        .await
        .map_err(|e| link.failed(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_value_names_its_holder() {
        assert_eq!(parse_holder("a http://10.0.0.1:8080", "a"), Holder::Me);
        assert_eq!(
            parse_holder("b http://10.0.0.2:8080", "a"),
            Holder::Other {
                node: "b".into(),
                advertise: "http://10.0.0.2:8080".into()
            }
        );
        assert_eq!(
            parse_holder("b ", "a"),
            Holder::Other {
                node: "b".into(),
                advertise: String::new()
            }
        );
    }
}
