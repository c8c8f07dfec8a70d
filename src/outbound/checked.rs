//! A destination a caller chose (a push webhook), reached only at the addresses its
//! [`Policy`] checked: each request resolves the host once, checks every address the answer
//! holds, and connects to exactly those. The pool is kept while the answer stays the same, so
//! its keep-alive connections (all to checked addresses) are reused, and rebuilt when the
//! answer changes.

use std::net::SocketAddr;

use super::{h1, Error, Options, Policy, Pool};

/// One caller-chosen URL and the pool of the addresses its last check answered.
#[derive(Debug)]
pub(crate) struct Checked {
    url: String,
    policy: Policy,
    opts: Options,
    current: Option<(Vec<SocketAddr>, Pool)>,
}

impl Checked {
    /// `url` (checked on each request by `policy`), its requests bounded by `opts`.
    pub(crate) fn new(url: &str, policy: Policy, opts: Options) -> Self {
        Checked {
            url: url.to_owned(),
            policy,
            opts,
            current: None,
        }
    }

    /// POSTs a JSON body ([`Pool::post_json`]) to the addresses `url` resolves to now, every
    /// one of them allowed; [`Error::Refused`] when the policy refuses where it leads.
    pub(crate) async fn post(
        &mut self,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<h1::Answer, Error> {
        let addrs = self
            .policy
            .resolve(&self.url)
            .await
            .map_err(Error::Refused)?;
        self.pool(addrs)?.post_json(body, authorization).await
    }

    /// A pool connecting to `addrs` only: the one held when it connects to the same ones.
    fn pool(&mut self, mut addrs: Vec<SocketAddr>) -> Result<&Pool, Error> {
        // In one order, so a resolver that rotates its answers keeps the connection.
        addrs.sort_unstable();
        let kept = match self.current.take() {
            Some((held, pool)) if held == addrs => (held, pool),
            _ => {
                let pool = Pool::new(&self.url, &self.opts, 0)?.pinned_to(addrs.clone().into());
                (addrs, pool)
            }
        };
        Ok(&self.current.insert(kept).1)
    }
}
