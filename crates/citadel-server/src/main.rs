//! `citadel`: serve (default), check a config, print the version.
//!
//! `citadel [serve] [--config F]` runs the node until SIGINT/SIGTERM (a
//! second signal exits at once); `citadel check [--config F]` validates and
//! exits non-zero with a message naming the bad key; `citadel version`.

use std::io::Write as _;
use std::path::PathBuf;

use citadel_server::config::{CliOverrides, Config, ConfigSource};
use citadel_server::{NodeBuilder, banner};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "citadel", version, about = "Citadel realtime game server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (default: ./citadel.toml if present, else built-in defaults).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Overrides logging.level.
    #[arg(long, global = true)]
    log_level: Option<String>,
    /// Overrides http.bind.
    #[arg(long, global = true)]
    bind: Option<String>,
    /// Overrides server.node_id.
    #[arg(long, global = true)]
    node_id: Option<String>,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Serve (the default).
    Serve,
    /// Validate the configuration and exit.
    Check,
    /// Print the version.
    Version,
    /// Create the database if needed and apply pending migrations.
    Migrate,
    /// Operator actions on accounts.
    Account {
        #[command(subcommand)]
        action: AccountAction,
    },
    /// Operator actions on player notifications.
    Notification {
        #[command(subcommand)]
        action: NotificationAction,
    },
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
enum NotificationAction {
    /// Store a notification in a player's inbox. This command is its own
    /// process, so no live copy is sent: the player sees it on the next
    /// `notifications.list` (clients list after every reconnect).
    Send {
        /// The recipient's user id.
        user_id: String,
        /// Application category code.
        #[arg(long)]
        code: i64,
        /// Short title.
        #[arg(long)]
        subject: String,
        /// Payload, a JSON value (usually an object).
        #[arg(long)]
        content: String,
        /// Sender text (default `server`).
        #[arg(long)]
        sender: Option<String>,
        /// Idempotency key: a repeat with the same key stores nothing new.
        #[arg(long)]
        delivery_key: Option<String>,
    },
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
enum AccountAction {
    /// Disable an account: sign-in fails and its live connections close.
    Disable {
        /// The account's user id.
        user_id: String,
    },
    /// Re-enable a disabled account.
    Enable {
        /// The account's user id.
        user_id: String,
    },
}

fn load(cli: &Cli) -> Result<(Config, ConfigSource), String> {
    let overrides = CliOverrides {
        log_level: cli.log_level.clone(),
        http_bind: cli.bind.clone(),
        node_id: cli.node_id.clone(),
    };
    Config::load(cli.config.as_deref(), std::env::vars(), &overrides).map_err(|e| e.to_string())
}

fn backend_name(config: &Config) -> &'static str {
    if citadel_server::store::is_postgres_url(&config.database.url) {
        "postgres"
    } else {
        "sqlite"
    }
}

/// Loads the config, connects and migrates the database, runs `f`.
fn run_with_db<F, Fut>(cli: &Cli, f: F) -> std::process::ExitCode
where
    F: FnOnce(Config, citadel_server::store::SqlStore) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let (config, _) = match load(cli) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("error: {err}");
            return std::process::ExitCode::from(2);
        }
    };
    let Some(runtime) = build_runtime(false) else {
        return std::process::ExitCode::FAILURE;
    };
    let result = runtime.block_on(async move {
        let store = citadel_server::node::connect_store(&config).await?;
        f(config, store).await
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The async runtime (multi-threaded for serving), or `None` after
/// printing why it could not start. A process allowed one CPU only (CPU
/// affinity or a cgroup quota, as `available_parallelism` reports) gets a
/// current-thread runtime even for serving: a one-worker multi-thread
/// runtime runs the same tasks on the same core, plus its cross-thread
/// queue and wake-up machinery on every task wake.
fn build_runtime(multi_thread: bool) -> Option<tokio::runtime::Runtime> {
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let mut builder = if multi_thread && !one_cpu {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    match builder.enable_all().build() {
        Ok(rt) => Some(rt),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            None
        }
    }
}

fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.logging.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    if config.logging.format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command.clone().unwrap_or(Command::Serve) {
        Command::Migrate => run_with_db(&cli, |config, _store| async move {
            println!("database migrated ({})", backend_name(&config));
            Ok(())
        }),
        Command::Account { action } => run_with_db(&cli, move |_config, store| async move {
            use citadel_server::store::AccountStore;
            let (user_id, disabled) = match &action {
                AccountAction::Disable { user_id } => (user_id.clone(), true),
                AccountAction::Enable { user_id } => (user_id.clone(), false),
            };
            let now = citadel_server::services::accounts::now_ms();
            if store.set_disabled(&user_id, disabled, now).await? {
                println!(
                    "account {} {}",
                    user_id,
                    if disabled { "disabled" } else { "enabled" }
                );
                Ok(())
            } else {
                anyhow::bail!("no such account")
            }
        }),
        Command::Notification { action } => run_with_db(&cli, move |config, store| async move {
            let NotificationAction::Send {
                user_id,
                code,
                subject,
                content,
                sender,
                delivery_key,
            } = action;
            let content: serde_json::Value = serde_json::from_str(&content)
                .map_err(|e| anyhow::anyhow!("--content is not valid JSON: {e}"))?;
            let store: std::sync::Arc<dyn citadel_server::store::Store> =
                std::sync::Arc::new(store);
            // No connections live in this process: nothing is delivered live.
            let places = std::sync::Arc::new(citadel_server::realm::Places::default());
            let router = std::sync::Arc::new(citadel_server::router::LocalRouter::new(places));
            let service = citadel_server::services::notifications::NotificationService::new(
                store,
                router,
                config.notifications.clone(),
                std::sync::Arc::new(citadel_server::metrics::Metrics::default()),
            );
            let sent = service
                .send(citadel_server::services::notifications::Outgoing {
                    recipient: user_id,
                    code,
                    subject,
                    content,
                    sender,
                    delivery_key,
                })
                .await?;
            println!("{}", serde_json::to_string(&sent)?);
            Ok(())
        }),
        Command::Version => {
            println!("citadel {}", env!("CARGO_PKG_VERSION"));
            std::process::ExitCode::SUCCESS
        }
        Command::Check => match load(&cli) {
            Ok((config, _)) => {
                println!(
                    "config ok: node_id={} bind={} log_level={} log_format={}",
                    config.server.node_id,
                    config.http.bind,
                    config.logging.level,
                    config.logging.format
                );
                // The Lua script is loaded and its registrations counted; nothing is started.
                match citadel_server::runtime::check(&config.runtime) {
                    Ok(Some(registered)) => {
                        println!(
                            "script ok: {}/main.lua registers {} RPC method(s), {} message kind(s), {} hook(s)",
                            config.runtime.scripts_dir,
                            registered.rpc.len(),
                            registered.message.len(),
                            registered.hooks.len()
                        );
                        std::process::ExitCode::SUCCESS
                    }
                    Ok(None) => {
                        println!("script: none (built-in relay)");
                        std::process::ExitCode::SUCCESS
                    }
                    Err(err) => {
                        eprintln!("error: {}/main.lua: {err}", config.runtime.scripts_dir);
                        std::process::ExitCode::from(2)
                    }
                }
            }
            Err(err) => {
                eprintln!("error: {err}");
                std::process::ExitCode::from(2)
            }
        },
        Command::Serve => {
            let (config, source) = match load(&cli) {
                Ok(loaded) => loaded,
                Err(err) => {
                    eprintln!("error: {err}");
                    return std::process::ExitCode::from(2);
                }
            };
            init_logging(&config);
            let Some(runtime) = build_runtime(true) else {
                return std::process::ExitCode::FAILURE;
            };
            match runtime.block_on(serve(config, source)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("error: {err:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}

async fn serve(config: Config, source: ConfigSource) -> anyhow::Result<()> {
    // Install the handlers before anything is announced, so a signal that
    // arrives right after the banner is never the default (kill) action.
    let mut signals = Signals::install()?;
    // Before any listener opens: the soft descriptor limit goes up to the
    // hard one, and a budget the limit cannot cover is logged and shown.
    let descriptors = citadel_server::fdlimit::prepare(&config);
    let node = NodeBuilder::new(config.clone()).start().await?;
    let ws = node.ws_addr.map(|a| a.to_string());
    let quic = node.quic_url();
    let webtransport = node.webtransport_url();
    let listeners = banner::Listeners {
        ws: ws.as_deref(),
        quic: quic.as_deref(),
        webtransport: webtransport.as_deref(),
    };
    // A closed stdout (a supervisor that stopped reading) must not stop the node.
    let banner = banner::render(
        &config,
        &source,
        &node.http_addr.to_string(),
        listeners,
        &descriptors.banner_lines(),
    );
    let _ = writeln!(std::io::stdout(), "{banner}").and_then(|()| std::io::stdout().flush());
    tracing::info!(node_id = %config.server.node_id, http = %node.http_addr, "serving");
    signals.next().await;
    tracing::info!(
        grace_ms = config.shutdown.grace_ms,
        "shutting down; a second signal exits at once"
    );
    node.shutdown();
    tokio::spawn(async move {
        signals.next().await;
        eprintln!("second signal: exiting now");
        std::process::exit(130);
    });
    node.wait().await;
    tracing::info!("stopped");
    Ok(())
}

/// SIGINT and SIGTERM, installed once.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
