//! The faults injected, when each was in force, and which failures each one explains.

use std::sync::Mutex;
use std::time::Instant;

/// What was broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A replica SIGKILLed (and started again); the index is the replica's.
    ReplicaKilled(usize),
    /// `redis-server` stopped and started again.
    RedisRestarted,
    /// One replica's sid child SIGKILLed (the replica starts another).
    SidKilled(usize),
    /// The legacy upstream stopped: its port refuses connections for 5 s.
    UpstreamRefusing,
}

impl Kind {
    pub fn label(self) -> String {
        match self {
            Kind::ReplicaKilled(r) => format!("replica r{} SIGKILLed", r + 1),
            Kind::RedisRestarted => "redis-server restarted".into(),
            Kind::SidKilled(r) => format!("sid child of r{} SIGKILLed", r + 1),
            Kind::UpstreamRefusing => "upstream refusing".into(),
        }
    }

    /// The kind without its replica, for the summary's table.
    pub fn family(self) -> &'static str {
        match self {
            Kind::ReplicaKilled(_) => "replica SIGKILL",
            Kind::RedisRestarted => "redis restart",
            Kind::SidKilled(_) => "sid child SIGKILL",
            Kind::UpstreamRefusing => "upstream refusing 5 s",
        }
    }
}

/// One fault: from its injection to its repair, plus the time the system is given to notice
/// the repair (a lapsed lease, a reconnect backoff).
#[derive(Clone, Debug)]
pub struct Window {
    pub kind: Kind,
    pub start: f64,
    pub end: Option<f64>,
    pub settle: f64,
}

/// The timeline of faults, read by every checker to tell an injected failure from a bug.
pub struct Timeline {
    t0: Instant,
    windows: Mutex<Vec<Window>>,
}

impl Timeline {
    pub fn new() -> Self {
        Timeline {
            t0: Instant::now(),
            windows: Mutex::new(Vec::new()),
        }
    }

    /// Seconds since the run began.
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// A fault begins; returns its index for [`Timeline::repaired`].
    pub fn begin(&self, kind: Kind, settle: f64) -> usize {
        let mut w = self.windows.lock().unwrap();
        w.push(Window {
            kind,
            start: self.now(),
            end: None,
            settle,
        });
        w.len() - 1
    }

    pub fn repaired(&self, idx: usize) {
        let now = self.now();
        self.windows.lock().unwrap()[idx].end = Some(now);
    }

    /// The faults in force at any moment of `[from, to]` (their settle time included) that
    /// `explains` accepts.
    pub fn explaining(&self, from: f64, to: f64, explains: impl Fn(Kind) -> bool) -> Option<Kind> {
        let w = self.windows.lock().unwrap();
        w.iter()
            .find(|w| {
                let end = w.end.map_or(f64::INFINITY, |e| e + w.settle);
                w.start <= to && from <= end && explains(w.kind)
            })
            .map(|w| w.kind)
    }

    /// Whether any fault was in force during `[from, to]`.
    pub fn any(&self, from: f64, to: f64) -> bool {
        self.explaining(from, to, |_| true).is_some()
    }

    pub fn all(&self) -> Vec<Window> {
        self.windows.lock().unwrap().clone()
    }
}

/// Up to this many descriptions are kept per checker; all are counted.
const KEEP: usize = 25;

/// What a checker found wrong.
#[derive(Default)]
pub struct Problems {
    list: Mutex<(u64, Vec<String>)>,
}

impl Problems {
    pub fn add(&self, what: String) {
        let mut l = self.list.lock().unwrap();
        l.0 += 1;
        if l.1.len() < KEEP {
            l.1.push(what);
        }
    }

    pub fn count(&self) -> u64 {
        self.list.lock().unwrap().0
    }

    pub fn listed(&self) -> Vec<String> {
        self.list.lock().unwrap().1.clone()
    }
}

/// How often each failure was seen under each fault, for the summary.
#[derive(Default)]
pub struct Excused {
    seen: Mutex<std::collections::BTreeMap<(String, &'static str), u64>>,
}

impl Excused {
    pub fn note(&self, what: String, kind: Kind) {
        *self
            .seen
            .lock()
            .unwrap()
            .entry((what, kind.family()))
            .or_default() += 1;
    }

    pub fn table(&self) -> Vec<((String, &'static str), u64)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}
