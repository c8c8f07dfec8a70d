//! The processes of the run: `redis-server`, the legacy upstream, three replicas; started,
//! killed and started again on the same ports, and their RSS and open fds read from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `cluster.lease_ms` of every replica.
pub const LEASE_MS: u64 = 3_000;
pub const REPLICAS: usize = 3;

pub struct Ports {
    pub redis: u16,
    pub upstream: u16,
    pub feed: u16,
    pub replicas: [u16; REPLICAS],
}

impl Ports {
    pub fn from_base(base: u16) -> Self {
        Ports {
            redis: base,
            upstream: base + 1,
            feed: base + 2,
            replicas: [base + 3, base + 4, base + 5],
        }
    }
}

/// One replica process's life, for the RSS and fd checks.
#[derive(Clone, Debug)]
pub struct Life {
    pub replica: usize,
    pub pid: u32,
    pub born: f64,
    pub died: Option<f64>,
}

struct Running {
    child: Child,
    life: usize,
}

pub struct Procs {
    bins: PathBuf,
    work: PathBuf,
    pub ports: Ports,
    redis: Mutex<Option<Child>>,
    upstream: Mutex<Option<Child>>,
    replicas: Mutex<Vec<Option<Running>>>,
    lives: Mutex<Vec<Life>>,
}

fn spawn(cmd: &mut Command, log: &Path) -> Child {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let err = out.try_clone().unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

fn kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// Waits until something accepts TCP connections on the port.
pub fn wait_port(port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Procs {
    pub fn new(bins: PathBuf, work: PathBuf, ports: Ports) -> Self {
        std::fs::create_dir_all(work.join("redis")).unwrap();
        Procs {
            bins,
            work,
            ports,
            redis: Mutex::new(None),
            upstream: Mutex::new(None),
            replicas: Mutex::new((0..REPLICAS).map(|_| None).collect()),
            lives: Mutex::new(Vec::new()),
        }
    }

    pub fn replica_url(&self, r: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports.replicas[r])
    }

    /// `redis-server` with an append-only file, so that a restart keeps the shared state.
    pub fn start_redis(&self) {
        let dir = self.work.join("redis");
        let child = spawn(
            Command::new("redis-server")
                .args(["--port", &self.ports.redis.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"])
                .args(["--appendfsync", "everysec", "--protected-mode", "no"])
                .arg("--dir")
                .arg(&dir),
            &self.work.join("redis.log"),
        );
        *self.redis.lock().unwrap() = Some(child);
        assert!(
            wait_port(self.ports.redis, Duration::from_secs(10)),
            "redis-server did not come up"
        );
    }

    /// Stops `redis-server` as an operator would (SIGTERM: it writes its file and exits).
    pub fn stop_redis(&self) {
        if let Some(mut c) = self.redis.lock().unwrap().take() {
            kill(c.id(), "-TERM");
            let _ = c.wait();
        }
    }

    pub fn start_upstream(&self) {
        let child = spawn(
            Command::new(self.bins.join("legacy_upstream"))
                .arg(format!("127.0.0.1:{}", self.ports.upstream))
                .args([
                    "--drop-feed-every",
                    "60",
                    "--refuse-on-sigusr1",
                    "5",
                    "--feed-addr",
                ])
                .arg(format!("127.0.0.1:{}", self.ports.feed)),
            &self.work.join("upstream.log"),
        );
        *self.upstream.lock().unwrap() = Some(child);
        assert!(
            wait_port(self.ports.feed, Duration::from_secs(10)),
            "the legacy upstream did not come up"
        );
    }

    /// The legacy upstream closes its connections and refuses new ones for 5 s (SIGUSR1);
    /// returns once it accepts again. Its state (the event feed's ids) lives on.
    pub fn refuse_upstream(&self) {
        if let Some(c) = self.upstream.lock().unwrap().as_ref() {
            kill(c.id(), "-USR1");
        }
        std::thread::sleep(Duration::from_secs(5));
        assert!(
            wait_port(self.ports.upstream, Duration::from_secs(5)),
            "the legacy upstream did not take connections again"
        );
    }

    fn kill_upstream(&self) {
        if let Some(mut c) = self.upstream.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn config(&self, r: usize) -> PathBuf {
        let p = &self.ports;
        let path = self.work.join(format!("r{}.toml", r + 1));
        let toml = format!(
            r#"[server]
listen = "127.0.0.1:{port}"
[[upstreams]]
name = "legacy"
url = "http://127.0.0.1:{up}/a2a"
dialect = "legacy"
timeout_ms = 5000
[[routes]]
methods = ["*"]
upstream = "legacy"
[sid]
enabled = true
command = [{sid:?}, "--raw", "--tag", "chaos-r{n}"]
replay_events = 512
keepalive_ms = 5000
[events]
source = "http://127.0.0.1:{feed}/events"
replay_events = 128
keepalive_ms = 5000
[cluster]
redis = "redis://127.0.0.1:{redis}/0"
node_id = "r{n}"
advertise = "http://127.0.0.1:{port}"
lease_ms = {lease}
"#,
            port = p.replicas[r],
            up = p.upstream,
            sid = self.bins.join("fake_sid").display().to_string(),
            n = r + 1,
            feed = p.feed,
            redis = p.redis,
            lease = LEASE_MS,
        );
        std::fs::write(&path, toml).unwrap();
        path
    }

    /// Starts replica `r` and waits for its `/readyz`-able port.
    pub fn start_replica(&self, r: usize, now: f64) {
        let child = spawn(
            Command::new(self.bins.join("wiregate"))
                .arg("--config")
                .arg(self.config(r))
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1"),
            &self.work.join(format!("r{}.log", r + 1)),
        );
        let mut lives = self.lives.lock().unwrap();
        lives.push(Life {
            replica: r,
            pid: child.id(),
            born: now,
            died: None,
        });
        let life = lives.len() - 1;
        drop(lives);
        self.replicas.lock().unwrap()[r] = Some(Running { child, life });
        assert!(
            wait_port(self.ports.replicas[r], Duration::from_secs(20)),
            "replica r{} did not come up",
            r + 1
        );
    }

    /// SIGKILLs replica `r` and the sid child it leaves behind.
    pub fn kill_replica(&self, r: usize, now: f64) {
        if let Some(mut run) = self.replicas.lock().unwrap()[r].take() {
            let _ = run.child.kill();
            let _ = run.child.wait();
            self.lives.lock().unwrap()[run.life].died = Some(now);
        }
        for pid in self.sid_children(r) {
            kill(pid, "-KILL");
        }
    }

    /// The fake sid processes started by replica `r` (by the tag on their command line).
    pub fn sid_children(&self, r: usize) -> Vec<u32> {
        let tag = format!("chaos-r{}", r + 1);
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            if cmd.contains("fake_sid") && cmd.split('\0').any(|a| a == tag) {
                out.push(pid);
            }
        }
        out
    }

    pub fn kill_sid(&self, r: usize) -> usize {
        let pids = self.sid_children(r);
        for &pid in &pids {
            kill(pid, "-KILL");
        }
        pids.len()
    }

    pub fn lives(&self) -> Vec<Life> {
        self.lives.lock().unwrap().clone()
    }

    /// Stops everything: the replicas gracefully (SIGTERM), the rest at once.
    pub fn stop_all(&self) {
        let mut reps = self.replicas.lock().unwrap();
        for run in reps.iter_mut().flatten() {
            kill(run.child.id(), "-TERM");
        }
        for run in reps.iter_mut().flatten() {
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if run.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = run.child.kill();
            let _ = run.child.wait();
        }
        reps.iter_mut().for_each(|r| *r = None);
        drop(reps);
        for r in 0..REPLICAS {
            for pid in self.sid_children(r) {
                kill(pid, "-KILL");
            }
        }
        self.kill_upstream();
        if let Some(mut c) = self.redis.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// RSS (kB) and open fds of a process, or `None` once it is gone.
pub fn footprint(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((rss, fds))
}
