//! How a context reaches its sid: the one type both the context and its I/O tasks name.

/// How the context reaches sid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// A child process on stdin/stdout; sid reads nothing during a turn.
    Stdio(Vec<String>),
    /// An attached `sid --listen` socket (`unix:///path` or `tcp://host:port`).
    Socket(String),
}
