//! The `wiregate` command line: serve, check the configuration, or run the demo (with the
//! `demo` feature).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use wiregate::config::{Config, ConfigError};
#[cfg(feature = "demo")]
use wiregate::demo;
use wiregate::server;

/// jemalloc, not glibc's malloc: under SSE churn (subscriptions' medium-lived state interleaved
/// with every call's short-lived allocations) glibc's arenas fill with sub-page holes and RSS
/// climbs about 350 kB a minute with a flat live heap; jemalloc's size-class slabs keep it flat
/// (benches/SOAK.md, "What grows").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("WG_BUILD_COMMIT"),
    ")"
);

/// A protocol gateway: legacy agent envelope ⇄ JSON-RPC 2.0, and sid --raw ⇄ HTTP + SSE.
#[derive(Parser, Debug)]
#[command(name = "wiregate", version = VERSION)]
struct Cli {
    /// Configuration file (default ./gateway.toml; built-in defaults when it is absent).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Serve with an embedded demo legacy upstream; needs no other file (a build with the
    /// `demo` feature, the default).
    #[arg(long)]
    demo: bool,
    /// Override `server.listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the effective configuration (secrets masked), or every error with its key path.
    CheckConfig,
    /// Describe the configuration file: every key, or its JSON Schema.
    Config {
        #[command(subcommand)]
        what: ConfigDoc,
    },
    /// Print a running gateway's migration report (`GET /migration`) as tables: splits,
    /// rollbacks, shadow comparisons, and who still speaks legacy.
    Migration {
        /// The gateway's base URL (default: `http://` + `server.listen` of the configuration).
        #[arg(long)]
        url: Option<String>,
        /// An admin token (default: the first of `server.admin_tokens`, if any).
        #[arg(long, env = "WIREGATE_ADMIN_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Print the report's JSON instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        tls: AdminTls,
    },
    /// Ask a running gateway to re-read its configuration (as SIGHUP does) and print what it
    /// did: reloaded, or refused with every error; and what needs a restart.
    Reload {
        /// The gateway's base URL (default: http://<server.listen> of the configuration, or
        /// https:// when it has [server.tls]).
        #[arg(long)]
        url: Option<String>,
        /// A token of `server.admin_tokens` (default: the first of them, if any).
        #[arg(long, env = "WIREGATE_ADMIN_TOKEN", hide_env_values = true)]
        token: Option<String>,
        #[command(flatten)]
        tls: AdminTls,
    },
    /// Print a completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Run the fake sid that `--demo` bridges (`demo-sid --raw`).
    #[command(hide = true)]
    DemoSid {
        /// Arguments as sid takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// What `wiregate config` prints; neither reads a configuration file.
#[derive(Subcommand, Debug, Clone, Copy)]
enum ConfigDoc {
    /// Every key as Markdown (path, type, default, reload or restart, meaning): docs/configuration.md.
    Reference,
    /// The file's JSON Schema (draft 2020-12): docs/gateway.schema.json.
    Schema,
}

/// How an admin subcommand reaches a TLS listener (`[server.tls]`), named as curl names them.
#[derive(clap::Args, Debug, Clone, Default)]
struct AdminTls {
    /// PEM file of the CAs the gateway's certificate is verified against over https://
    /// (default: the platform's roots).
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// PEM client certificate to present over https:// (needed when the listener has
    /// server.tls.client_ca); with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The PEM private key of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
}

impl AdminTls {
    /// The client configuration these flags ask for; `None` (the platform's roots, no client
    /// certificate) when none is given. A bad file is reported with its flag.
    fn client_config(&self) -> Result<Option<Arc<rustls::ClientConfig>>, ExitCode> {
        if self.cacert.is_none() && self.cert.is_none() {
            return Ok(None);
        }
        let path = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(String::new, |p| p.to_string_lossy().into_owned())
        };
        wiregate::config::tls::admin_client_config(
            &path(&self.cacert),
            &path(&self.cert),
            &path(&self.key),
        )
        .map(Some)
        .map_err(|e| {
            let flag = match e.key {
                "ca_file" => "--cacert",
                "client_cert" => "--cert",
                "client_key" => "--key",
                other => other,
            };
            eprintln!("wiregate: {flag}: {}", e.message);
            ExitCode::from(2)
        })
    }
}

/// The configuration file read when `--config` names none.
const DEFAULT_CONFIG: &str = "gateway.toml";

/// The configuration the command line names: [`read_config`], or for `--demo` without
/// `--config` the defaults and the environment only (the demo needs no file).
fn load(cli: &Cli) -> Result<Config, ExitCode> {
    let file = match (&cli.config, cli.demo) {
        (None, true) => Some(PathBuf::from("/nonexistent/wiregate-demo.toml")),
        (file, _) => file.clone(),
    };
    read_config(file.as_deref(), cli.config.is_some(), cli.listen).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(2)
    })
}

/// The configuration `file` holds (./gateway.toml when `None`, which may be missing unless
/// `explicit`), with `--listen` applied: what the gateway starts with and what a reload reads.
fn read_config(
    file: Option<&Path>,
    explicit: bool,
    listen: Option<SocketAddr>,
) -> Result<Config, ConfigError> {
    let mut config = Config::load(file.unwrap_or(Path::new(DEFAULT_CONFIG)), explicit)?;
    if let Some(l) = listen {
        config.server.listen = l;
    }
    Ok(config)
}

/// Refuses the demo's commands in a binary built without the `demo` feature: exit status 2,
/// as for any other usage error.
#[cfg(not(feature = "demo"))]
fn without_demo(cli: &Cli) -> Option<ExitCode> {
    let what = match &cli.command {
        Some(Command::DemoSid { .. }) => "demo-sid",
        _ if cli.demo => "--demo",
        _ => return None,
    };
    eprintln!(
        "wiregate: {what} is not available: this binary was built without the `demo` feature \
         (build with default features, e.g. `cargo run --release -- --demo`)"
    );
    Some(ExitCode::from(2))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(not(feature = "demo"))]
    if let Some(code) = without_demo(&cli) {
        return code;
    }
    if let Some(Command::Completions { shell }) = &cli.command {
        use clap::CommandFactory;
        clap_complete::generate(
            *shell,
            &mut Cli::command(),
            "wiregate",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Config { what }) = &cli.command {
        match what {
            ConfigDoc::Reference => print!("{}", wiregate::config::reference::markdown()),
            ConfigDoc::Schema => {
                let schema = wiregate::config::reference::schema();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&schema).unwrap_or_default()
                );
            }
        }
        return ExitCode::SUCCESS;
    }
    #[cfg(feature = "demo")]
    if let Some(Command::DemoSid { args }) = &cli.command {
        demo::sid::run(args.clone());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Migration {
        url,
        token,
        json,
        tls,
    }) = &cli.command
    {
        return migration_report(&cli, url.clone(), token.clone(), *json, tls);
    }
    let config = match load(&cli) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(Command::CheckConfig) = cli.command {
        print!("{}", config.to_masked_toml());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Reload { url, token, tls }) = &cli.command {
        let tls = match tls.client_config() {
            Ok(t) => t,
            Err(code) => return code,
        };
        let url = url.clone().unwrap_or_else(|| admin_base(&config.server));
        // As `wiregate migration` does: once tokens are set, loopback needs one too.
        let token = token
            .clone()
            .or_else(|| config.server.admin_tokens.first().cloned());
        return admin_call(
            axum::http::Method::POST,
            &url,
            wiregate::http::routes::ADMIN_RELOAD,
            token.as_deref(),
            tls,
        );
    }
    serve(&cli, config)
}

/// Serves `config` on a runtime of `server.worker_threads` (or its per-core workers) until a
/// shutdown signal.
fn serve(cli: &Cli, config: Config) -> ExitCode {
    let log = wiregate::telemetry::logging::init(&config.log);
    // One worker: a current-thread runtime, which wakes tasks without cross-thread handoffs.
    // Per-core workers run their own runtimes (`server::serve`); this one runs what outlives a
    // call, on the main thread.
    let per_core = config.server.runtime == wiregate::config::Runtime::PerCore;
    let mut builder = match config.server.worker_threads {
        n if n == 1 || per_core => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            if n > 0 {
                b.worker_threads(n);
            }
            b
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let reload_source = (!cli.demo).then(|| (cli.config.clone(), cli.listen));
    match runtime.block_on(run(config, cli.demo, reload_source, log)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wiregate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The base URL the admin subcommands reach a gateway configured with `server` at: https:// with
/// `[server.tls]`, else http://; an unspecified listen address is reached on loopback.
fn admin_base(server: &wiregate::config::Server) -> String {
    let listen = server.listen;
    let ip = match listen.ip().is_unspecified() {
        true => std::net::IpAddr::from([127, 0, 0, 1]),
        false => listen.ip(),
    };
    let scheme = match server.tls.enabled() {
        true => "https",
        false => "http",
    };
    format!("{scheme}://{}", SocketAddr::new(ip, listen.port()))
}

/// The small runtime an admin subcommand's one request runs on.
fn admin_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Sends one admin request and prints the answer; exit status 0 for a 2xx answer.
fn admin_call(
    method: axum::http::Method,
    base: &str,
    path: &str,
    token: Option<&str>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> ExitCode {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let runtime = match admin_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(wiregate::auth::admin::request(method, &url, token, tls)) {
        Ok((status, body)) => {
            println!("{}", String::from_utf8_lossy(&body));
            if status.is_success() {
                ExitCode::SUCCESS
            } else {
                eprintln!("wiregate: {url} answered {status}");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("wiregate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a reload re-reads: the `--config` file (or ./gateway.toml), with `--listen` applied.
type ReloadSource = (Option<PathBuf>, Option<SocketAddr>);

// Without the `demo` feature `demo_mode` is never set (`without_demo` refused it), and the
// configuration is not changed.
#[cfg_attr(not(feature = "demo"), allow(unused_mut, unused_variables))]
async fn run(
    mut config: Config,
    demo_mode: bool,
    reload_source: Option<ReloadSource>,
    log: wiregate::telemetry::logging::LogHandle,
) -> std::io::Result<()> {
    #[cfg(feature = "demo")]
    if demo_mode {
        demo::guide::configure(&mut config).await?;
    }
    let running = server::serve(&config).await?;
    let addr = running.addr;
    tracing::info!(%addr, "wiregate listening");
    if let Some((path, listen)) = reload_source {
        let file = path
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
        let changes = match config.server.watch_config {
            true => Some(server::config_watch::changes(&file)?),
            false => None,
        };
        let load = move || read_config(path.as_deref(), path.is_some(), listen);
        running
            .reloader()
            .watch(load, move |c: &Config| log.apply(&c.log), changes)?;
    } else {
        // Nothing to re-read: SIGHUP is noted, not left to end the process by default.
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::warn!("SIGHUP: this gateway reloads nothing (it was started with --demo)");
            }
        });
    }
    #[cfg(feature = "demo")]
    if demo_mode {
        let context = match running.gateway().bridge() {
            Some(b) => {
                let params = serde_json::json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "hello"}]}});
                let raw = serde_json::value::to_raw_value(&params).expect("JSON");
                match b.call("message/send", Some(&raw), None).await {
                    Ok(task) => task["contextId"].as_str().unwrap_or_default().to_owned(),
                    Err(e) => {
                        tracing::warn!(error = %e, "the demo sid did not start");
                        String::new()
                    }
                }
            }
            None => String::new(),
        };
        demo::guide::print_guide(addr, &context);
    }
    server::service::ready();
    shutdown_signal().await;
    running
        .drain(Duration::from_millis(config.server.drain_ms))
        .await;
    tracing::info!("shutting down; finishing in-flight calls");
    running
        .shutdown(Duration::from_millis(config.server.shutdown_grace_ms))
        .await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// `wiregate migration`: fetches `/migration` and prints it.
fn migration_report(
    cli: &Cli,
    url: Option<String>,
    token: Option<String>,
    json: bool,
    tls: &AdminTls,
) -> ExitCode {
    let tls = match tls.client_config() {
        Ok(t) => t,
        Err(code) => return code,
    };
    // The configuration only supplies defaults here; an explicit --url needs none.
    let config = match (&url, load(cli)) {
        (_, Ok(c)) => Some(c),
        (Some(_), Err(_)) => None,
        (None, Err(code)) => return code,
    };
    let url = url.unwrap_or_else(|| {
        admin_base(
            &config
                .as_ref()
                .map_or_else(Default::default, |c| c.server.clone()),
        )
    });
    let token = token.or_else(|| config.and_then(|c| c.server.admin_tokens.first().cloned()));
    let runtime = match admin_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(fetch_report(&url, token.as_deref(), tls)) {
        Ok(report) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            print!("{}", wiregate::migration::report::tables(&report));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wiregate migration: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn fetch_report(
    url: &str,
    token: Option<&str>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<serde_json::Value, String> {
    let target = format!("{}/migration", url.trim_end_matches('/'));
    let (status, body) =
        wiregate::auth::admin::request(axum::http::Method::GET, &target, token, tls).await?;
    if !status.is_success() {
        return Err(format!(
            "{target} answered {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{target} sent no JSON report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag, argument and subcommand carries a line of help, so `--help` lists each with
    /// what it does.
    #[test]
    fn every_flag_and_subcommand_has_a_line_of_help() {
        fn check(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in c.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if a.get_help().is_none() && !builtin {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in c.get_subcommands() {
                if s.get_about().is_none() && s.get_name() != "help" {
                    missing.push(format!("{path} {}", s.get_name()));
                }
                check(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let cli = Cli::command();
        cli.clone().debug_assert();
        let mut missing = Vec::new();
        check(&cli, "wiregate", &mut missing);
        assert!(missing.is_empty(), "no help for: {missing:?}");
        let subcommands: Vec<&str> = cli.get_subcommands().map(|s| s.get_name()).collect();
        for name in [
            "check-config",
            "config",
            "migration",
            "reload",
            "completions",
        ] {
            assert!(subcommands.contains(&name), "{name}");
        }
    }
}
