//! The process's log: `RUST_LOG` filters (default `info`), `[log] format` shapes the lines
//! (`text` or `json`), and a reload can change the shape without a restart.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, Layer, Registry};

use crate::config::{Log, LogFormat};

type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

/// Changes the log's shape.
#[derive(Clone)]
pub struct LogHandle(reload::Handle<Boxed, Registry>);

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogHandle")
    }
}

fn layer(format: LogFormat) -> Boxed {
    // Colours only for a person at a terminal (and never when NO_COLOR is set).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(fmt),
        LogFormat::Json => Box::new(fmt.json().flatten_event(true).with_current_span(false)),
    }
}

/// Installs the process's subscriber (once; later calls are no-ops that return a handle to
/// nothing).
pub fn init(log: &Log) -> LogHandle {
    let (shaped, handle) = reload::Layer::new(layer(log.format));
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(shaped)
        .with(filter)
        .try_init();
    LogHandle(handle)
}

impl LogHandle {
    /// Applies `log`'s format from now on.
    pub fn apply(&self, log: &Log) {
        if let Err(e) = self.0.reload(layer(log.format)) {
            tracing::warn!(error = %e, "the log format could not be changed");
        }
    }
}
