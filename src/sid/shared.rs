//! The bridge's side of `[cluster]`: exporting the contexts this replica runs, and answering
//! for tasks and contexts other replicas run, from Redis. Without a cluster link every method
//! here is the local answer and nothing more.

use std::sync::Arc;
use std::time::Duration;

use super::context::Context;
use super::{Bridge, Opened};
use crate::cluster::lease::{self, Holder};
use crate::cluster::log::{self, Exporter, Mirrors};
use crate::cluster::{tasks, Link};
use crate::config::Sid as SidConfig;
use crate::events::frames::Filter;
use crate::model::error::GatewayError;
use crate::model::task::Task;
use crate::outbound::{Options, Pool};

/// How long an answer waits for its task's events to reach Redis, so another replica asked
/// next already knows what this one answered. Past it the answer goes anyway (Redis is slow
/// or down, and `/readyz` says so).
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Most tasks of other replicas ListTasks reads.
const REMOTE_LIST_MAX: usize = 1_000;

/// Redis, and the local copies of other replicas' logs.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) link: Arc<Link>,
    mirrors: Arc<Mirrors>,
    /// Clients of the other replicas, by `advertise` URL.
    pub(super) owners: std::sync::Mutex<std::collections::HashMap<String, Arc<Pool>>>,
}

impl Shared {
    pub(super) fn new(link: Arc<Link>, cfg: &SidConfig) -> Self {
        Shared {
            mirrors: Mirrors::new(
                link.clone(),
                cfg.replay_events,
                cfg.max_subscribers,
                Duration::from_millis(cfg.lag_grace_ms),
            ),
            owners: Default::default(),
            link,
        }
    }
}

impl Bridge {
    /// Starts writing a context's events and tasks to Redis (with `[cluster]`).
    pub(super) fn export(&self, ctx: &Arc<Context>) -> Result<(), GatewayError> {
        let Some(sh) = &self.cluster else {
            return Ok(());
        };
        let weak = Arc::downgrade(ctx);
        let flushed = Exporter::spawn(
            sh.link.clone(),
            crate::cluster::keys::context_log(&ctx.id),
            ctx.id.clone(),
            &ctx.queue,
            self.cfg.replay_events,
            Some(Duration::from_millis(self.cfg.lag_grace_ms)),
            move |task| weak.upgrade().and_then(|c| c.task(task)),
        )?;
        // A mirror of this context (it ran elsewhere) is left to its subscribers: it reads on
        // from Redis what this replica now writes there, and idles out once they leave.
        let _ = ctx.flushed.set(flushed);
        if let Some(owner) = ctx.owner.get().cloned() {
            // Written as the child starts, long before a turn of it has an answer to name the
            // context by: the other replicas' checks read it (tenancy).
            let (link, id) = (sh.link.clone(), ctx.id.clone());
            crate::util::background::spawn(async move {
                if let Err(e) = tasks::set_tenant(&link, &id, &owner).await {
                    tracing::warn!(context = %id, error = %e, "cannot record a context's owner");
                }
            });
        }
        lease::keep(
            sh.link.clone(),
            ctx.id.clone(),
            Arc::downgrade(ctx),
            Context::session_id,
        );
        Ok(())
    }

    /// Refuses sid calls while the replicas' shared store is down (with `[cluster]`).
    pub(super) fn cluster_ready(&self) -> Result<(), GatewayError> {
        match &self.cluster {
            Some(sh) if !sh.link.is_up() => Err(sh.link.unavailable()),
            _ => Ok(()),
        }
    }

    /// Waits until what `ctx` produced so far is in Redis (at most [`FLUSH_WAIT`]).
    pub(super) async fn flushed(ctx: &Context) {
        let Some(rx) = ctx.flushed.get() else {
            return;
        };
        let target = ctx.queue.last_seq();
        let mut rx = rx.clone();
        let _ = tokio::time::timeout(FLUSH_WAIT, rx.wait_for(|s| *s >= target)).await;
    }

    /// A task's model and context, whichever replica runs it.
    pub async fn find_task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        match (self.task(task_id), &self.cluster) {
            (Err(GatewayError::TaskNotFound(_)), Some(sh)) => tasks::get(&sh.link, task_id)
                .await?
                .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned())),
            (local, _) => local,
        }
    }

    /// Every task this replica keeps, and (with `[cluster]`) the most recently changed ones of
    /// the others.
    pub async fn all_tasks_everywhere(&self) -> Result<Vec<(Task, String)>, GatewayError> {
        let mut all = self.all_tasks();
        if let Some(sh) = &self.cluster {
            let local: std::collections::HashSet<String> =
                all.iter().map(|(t, _)| t.id.clone()).collect();
            let remote = tasks::list(&sh.link, REMOTE_LIST_MAX).await?;
            all.extend(remote.into_iter().filter(|(t, _)| !local.contains(&t.id)));
        }
        Ok(all)
    }

    /// [`task_stream`](Self::task_stream), for a task of any replica.
    pub async fn open_task_stream(
        &self,
        task_id: &str,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let local = self.task_stream(task_id, last_event_id, live_if_running);
        let (Err(GatewayError::TaskNotFound(_)), Some(sh)) = (&local, &self.cluster) else {
            return local;
        };
        let (task, context_id) = tasks::get(&sh.link, task_id)
            .await?
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        let queue = sh.mirrors.open(&context_id).await?;
        Opened::task(
            &queue,
            task_id,
            context_id,
            !task.state.is_terminal(),
            last_event_id,
            live_if_running,
        )
    }

    /// [`context_stream`](Self::context_stream), for a context of any replica.
    pub async fn open_context_stream(
        &self,
        context_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        let local = self.context_stream(context_id, last_event_id);
        let (Err(GatewayError::ContextNotFound(_)), Some(sh)) = (&local, &self.cluster) else {
            return local;
        };
        let queue = sh.mirrors.open(context_id).await?;
        Ok(Opened {
            subscription: queue.subscribe(last_event_id)?,
            filter: Filter::default(),
            context_id: context_id.to_owned(),
        })
    }

    /// Whether streams of tasks and contexts this replica does not run are served from Redis.
    pub fn is_clustered(&self) -> bool {
        self.cluster.is_some()
    }
}

/// How often a replica sweeps for contexts whose owner was lost: a quarter of `lease_ms`, so
/// their open tasks fail within about `lease_ms` and a quarter of it of the owner's death.
pub(super) fn sweep_every(link: &Link) -> Duration {
    (link.lease / 4).clamp(Duration::from_millis(50), Duration::from_secs(5))
}

/// The tasks that were not final when their owners last wrote them, by context.
async fn open_tasks(
    sh: &Shared,
) -> Result<std::collections::HashMap<String, Vec<Task>>, GatewayError> {
    let mut open: std::collections::HashMap<String, Vec<Task>> = Default::default();
    for (t, c) in tasks::list(&sh.link, REMOTE_LIST_MAX).await? {
        if !t.state.is_terminal() {
            open.entry(c).or_default().push(t);
        }
    }
    Ok(open)
}

/// How long a call carried to a context's owner may take (a turn runs to its end).
pub(super) const FORWARD_TIMEOUT_MS: u64 = 600_000;

/// Most bytes of a JSON answer read back from the replica a call was carried to.
pub(super) const MAX_ANSWER: usize = 64 << 20;

/// Where a call for a context runs.
#[derive(Debug)]
pub(super) enum Place {
    /// On this replica (it runs the context, took it over, or the local rules answer).
    Here,
    /// On the replica holding the context's lease.
    There {
        /// Its node id.
        node: String,
        /// Its `cluster.advertise`.
        advertise: String,
    },
}

impl Bridge {
    /// Where a call naming `context_id` or `task_id` runs. A context this replica does not run
    /// is claimed: when its owner's lease has lapsed (the owner was lost) this replica takes it
    /// over; otherwise the call goes to the owner.
    pub(super) async fn place(
        &self,
        context_id: Option<&str>,
        task_id: Option<&str>,
    ) -> Result<Place, GatewayError> {
        let Some(sh) = &self.cluster else {
            return Ok(Place::Here);
        };
        let ctx_id = match (task_id, context_id) {
            (Some(t), _) if self.task_index().contains_key(t) => return Ok(Place::Here),
            (Some(t), _) => match tasks::get(&sh.link, t).await? {
                Some((_, c)) if !self.has_context(&c) => c,
                _ => return Ok(Place::Here),
            },
            (None, Some(c)) if !self.has_context(c) => c.to_owned(),
            _ => return Ok(Place::Here),
        };
        match lease::claim(&sh.link, &ctx_id).await? {
            Holder::Me => {
                self.take_over(sh, &ctx_id).await?;
                Ok(Place::Here)
            }
            Holder::Other { node, advertise } => Ok(Place::There { node, advertise }),
        }
    }

    /// Runs a context another replica ran and lost: its log continues where the shared one
    /// ends (holding what that retains, so a client resumes here as on any replica), sid
    /// resumes the recorded session, and the tasks that were open are failed (their
    /// subscribers, on any replica, see that update, and then their streams end).
    async fn take_over(&self, sh: &Shared, ctx_id: &str) -> Result<(), GatewayError> {
        let queue = crate::events::ReplayLog::new(self.cfg.replay_events)
            .with_max_subscribers(self.cfg.max_subscribers);
        let (queue, last) = log::continued(&sh.link, ctx_id, queue, self.cfg.replay_events).await?;
        let session = lease::session(&sh.link, ctx_id).await?;
        if last == 0 && session.is_none() {
            // Not a context any replica ran: the local rules answer (not found, or adopt).
            lease::release(&sh.link, ctx_id).await;
            return Ok(());
        }
        let lost = open_tasks(sh).await?.remove(ctx_id).unwrap_or_default();
        let owner = tasks::tenant(&sh.link, ctx_id).await?;
        let ctx = {
            let mut contexts = self.contexts();
            if contexts.contains_key(ctx_id) {
                return Ok(());
            }
            let full = Self::running_children(&contexts) >= self.cfg.max_contexts;
            if full {
                None
            } else {
                let ctx = self.stdio_context(ctx_id.to_owned(), queue, owner.as_deref())?;
                contexts.insert(ctx.id.clone(), ctx.clone());
                metrics::gauge!("wiregate_sid_contexts").set(contexts.len() as f64);
                Some(ctx)
            }
        };
        let Some(ctx) = ctx else {
            lease::release(&sh.link, ctx_id).await;
            return Err(GatewayError::TooManyContexts(self.cfg.max_contexts));
        };
        tracing::warn!(context = %ctx_id, tasks = lost.len(), session = ?session,
            "taking over a context whose replica was lost");
        {
            let mut index = self.task_index();
            for t in &lost {
                index.insert(t.id.clone(), ctx_id.to_owned());
            }
        }
        let ids: Vec<String> = lost.iter().map(|t| t.id.clone()).collect();
        ctx.adopt_lost(
            lost,
            &format!(
                "the replica running this task was lost; its context resumed on {}",
                sh.link.node_id
            ),
        );
        if let (Some(hook), false) = (self.lost_hook.get(), ids.is_empty()) {
            (hook.0)(ids);
        }
        ctx.spawn_child(&self.cfg.command, session)
            .map_err(|e| GatewayError::SidUnavailable(format!("cannot resume sid: {e}")))
    }

    /// Takes over every context whose owner was lost with tasks still open, so those tasks end
    /// `failed` everywhere without waiting for a call to name the context (see
    /// [`take_over`](Self::take_over)); forgets, in Redis, lost contexts with none open (the
    /// next call for one still resumes it). Run by every replica, every [`sweep_every`]: the
    /// lease decides which one takes a context.
    pub(super) async fn sweep(&self) -> Result<(), GatewayError> {
        let Some(sh) = &self.cluster else {
            return Ok(());
        };
        let orphans = lease::orphans(&sh.link, |c| self.has_context(c)).await?;
        if orphans.is_empty() {
            return Ok(());
        }
        // The contexts with a task open, read once for all of them.
        let open = open_tasks(sh).await?;
        for ctx_id in orphans {
            if !open.contains_key(&ctx_id) {
                lease::unlist(&sh.link, &ctx_id).await;
                continue;
            }
            match self.place(Some(&ctx_id), None).await {
                Ok(_) => {}
                Err(e) => tracing::warn!(context = %ctx_id, error = %e,
                    "cannot take over a context whose replica was lost"),
            }
        }
        Ok(())
    }

    /// For calls not carried to another replica (A2A's in a batch or on its REST binding):
    /// takes a lost context over, and refuses, naming the owner, a context another replica
    /// runs.
    pub async fn here_or_refuse(&self, turn: &super::Turn) -> Result<(), GatewayError> {
        match self
            .place(turn.context_id.as_deref(), turn.task_id.as_deref())
            .await?
        {
            Place::Here => Ok(()),
            Place::There { node, advertise } => Err(GatewayError::SidUnavailable(format!(
                "this context runs on replica {node} ({advertise}); send this call there, or \
                 alone (not in a batch) on a JSON-RPC path, which any replica carries to it"
            ))),
        }
    }

    /// The connections to the replica `node` at `advertise` (one pool per replica, kept).
    pub(super) fn owner_client(
        &self,
        node: &str,
        advertise: &str,
    ) -> Result<Arc<Pool>, GatewayError> {
        if advertise.is_empty() {
            return Err(GatewayError::SidUnavailable(format!(
                "this context runs on replica {node}, which has no cluster.advertise URL"
            )));
        }
        let Some(sh) = &self.cluster else {
            return Err(GatewayError::SidUnavailable("no cluster".into()));
        };
        let mut clients = sh.owners.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = clients.get(advertise) {
            return Ok(pool.clone());
        }
        let url = format!("{}/rpc", advertise.trim_end_matches('/'));
        let opts = Options::within(Duration::from_millis(FORWARD_TIMEOUT_MS), MAX_ANSWER);
        let pool = Pool::new(&url, &opts, 0).map_err(|e| {
            GatewayError::SidUnavailable(format!("replica {node}'s cluster.advertise: {e}"))
        })?;
        Ok(clients
            .entry(advertise.to_owned())
            .or_insert(Arc::new(pool))
            .clone())
    }

    /// Carries a non-streaming call to the replica running its context and returns its answer
    /// unchanged.
    pub(super) async fn forward(
        &self,
        to: Place,
        method: &str,
        p: Option<&serde_json::value::RawValue>,
    ) -> Result<serde_json::Value, GatewayError> {
        let Place::There { node, advertise } = to else {
            return Err(GatewayError::SidUnavailable(
                "no replica to forward to".into(),
            ));
        };
        let client = self.owner_client(&node, &advertise)?;
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": method,
            "params": p.map(|r| serde_json::from_str::<serde_json::Value>(r.get()).unwrap_or_default()),
        });
        let auth = self
            .cfg
            .bearer_tokens
            .first()
            .map(|t| format!("Bearer {t}"));
        metrics::counter!("wiregate_cluster_forwarded_total").increment(1);
        let answer = client
            .post_json(body.to_string().as_bytes(), auth.as_deref())
            .await
            .map_err(|e| {
                GatewayError::SidUnavailable(format!(
                    "this context runs on replica {node}, which did not answer: {e}"
                ))
            })?;
        let v: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|e| {
            GatewayError::SidUnavailable(format!("replica {node} answered something else: {e}"))
        })?;
        match v.get("error") {
            Some(err) => Err(GatewayError::Replica {
                code: err["code"].as_i64().unwrap_or(-32603),
                message: err["message"].as_str().unwrap_or("").to_owned(),
                data: err.get("data").cloned(),
                status: answer.status.as_u16(),
            }),
            None => Ok(v.get("result").cloned().unwrap_or_default()),
        }
    }
}
