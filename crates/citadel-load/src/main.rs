//! `citadel-load`: Citadel's load generator and benchmark reporter.
//!
//! What it is: `citadel-load run SCENARIO.toml [--target citadel|colyseus|raw]
//! [--json OUT] [--auth guest|device] [--transport ws|quic] [--set KEY=VALUE]`
//! starts (or attaches to) the target, drives the scenario's bots over
//! WebSocket (or QUIC: relay-fanout against a spawned citadel), prints a progress line on stderr and a summary table
//! on stdout; `citadel-load compare --citadel A.json [--colyseus B.json]
//! [--raw C.json]` prints one side-by-side table with ratios. What it is
//! not: a load test of remote hosts — every address is in 127.0.0.0/8.
//!
//! Call order: parse CLI → load scenario → check `ulimit -n` → start target
//! → build the target's connector → run the scenario → stop target → report.

mod bots;
mod compare;
mod lean;
mod procstat;
mod progress;
mod report;
mod scenario;
mod stats;
mod targets;
mod transport;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use bots::Ctx;
use progress::Progress;
use report::Report;
use scenario::Scenario;
use stats::Clock;
use targets::{ServerHandle, StartOptions, TargetKind};
use transport::{AuthMode, Connector};

#[derive(Parser, Debug)]
#[command(
    name = "citadel-load",
    version,
    about = "Load generator for Citadel and its peers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario against one target.
    Run(RunArgs),
    /// Print one table from the JSON reports of several targets.
    Compare {
        /// Citadel's report.
        #[arg(long)]
        citadel: PathBuf,
        /// Colyseus' report.
        #[arg(long)]
        colyseus: Option<PathBuf>,
        /// The raw relay's report.
        #[arg(long)]
        raw: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Scenario file (see bench/scenarios/).
    scenario: PathBuf,
    /// Server under test.
    #[arg(long, value_enum, default_value = "citadel")]
    target: TargetKind,
    /// Override a scenario key, e.g. `--set connections=19700` (repeatable;
    /// the value is TOML).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Attach to a running server (ws://127.0.0.1:PORT/ for citadel/raw,
    /// http://127.0.0.1:PORT for colyseus) instead of spawning one.
    #[arg(long)]
    url: Option<String>,
    /// pid of the attached server, for CPU/RSS sampling.
    #[arg(long)]
    server_pid: Option<u32>,
    /// HTTP API of an attached Citadel (http://127.0.0.1:PORT), for
    /// `--auth device`.
    #[arg(long)]
    http_url: Option<String>,
    /// How bots authenticate: `guest`, or `device` (one device account per
    /// bot, registered over the HTTP API; citadel target only).
    #[arg(long, value_enum, default_value = "guest")]
    auth: AuthArg,
    /// Server binary (default: `citadel` / `raw-relay` next to this tool).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Directory of the Colyseus peer.
    #[arg(long, default_value = "bench/peers/colyseus")]
    colyseus_dir: PathBuf,
    /// Pin the spawned server with `taskset -c LIST` (pin this tool with
    /// `taskset` on the command line).
    #[arg(long)]
    server_cpus: Option<String>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// Exit non-zero unless the run did its job (smoke tests; see
    /// `Report::check`).
    #[arg(long)]
    check: bool,
    /// relay-fanout bots: `lean` (own RFC 6455 client, one send wheel) or
    /// `tungstenite` (the classic per-bot loop over `BotTransport`).
    #[arg(long, value_enum, default_value = "lean")]
    bots: BotsArg,
    /// Bot transport: `ws` (WebSocket), or `quic` (citadel target,
    /// relay-fanout: one `QuicClient` per bot, positions as datagrams).
    #[arg(long, value_enum, default_value = "ws")]
    transport: TransportArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TransportArg {
    Ws,
    Quic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BotsArg {
    Lean,
    Tungstenite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthArg {
    Guest,
    Device,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Compare {
            citadel,
            colyseus,
            raw,
        } => compare_cmd(&citadel, colyseus.as_deref(), raw.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("citadel-load: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn compare_cmd(
    citadel: &std::path::Path,
    colyseus: Option<&std::path::Path>,
    raw: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let c = Report::read_json(citadel)?;
    let y = colyseus.map(Report::read_json).transpose()?;
    let r = raw.map(Report::read_json).transpose()?;
    print!("{}", compare::render(&c, y.as_ref(), r.as_ref()));
    Ok(())
}

/// Soft `Max open files` of this process.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let scenario = Scenario::load_with(&args.scenario, &args.set)?;
    let need = scenario.peak_connections() + 256;
    if let Some(limit) = open_file_limit()
        && limit < need
    {
        bail!(
            "{} needs about {need} open files but `ulimit -n` is {limit}: \
             run `ulimit -n {need}` (or up to `ulimit -Hn`) first",
            scenario.kind()
        );
    }
    if args.target == TargetKind::Colyseus && matches!(scenario, Scenario::RpcEcho(_)) {
        bail!("rpc-echo has no Colyseus equivalent: run it with --target citadel or raw");
    }
    if matches!(scenario, Scenario::PredictedInput(_))
        && (args.target != TargetKind::Citadel || args.auth == AuthArg::Device)
    {
        bail!("predicted-input needs --target citadel and guest bots (no --auth device)");
    }
    if matches!(scenario, Scenario::ActorSync(_)) && args.target != TargetKind::Citadel {
        bail!("actor-sync needs --target citadel (the peers have no networked actors)");
    }
    if args.auth == AuthArg::Device && matches!(scenario, Scenario::ActorSync(_)) {
        bail!("actor-sync bots authenticate as guests; drop --auth device");
    }
    let quic = args.transport == TransportArg::Quic;
    if quic
        && (args.target != TargetKind::Citadel
            || args.url.is_some()
            || !matches!(scenario, Scenario::RelayFanout(_)))
    {
        bail!("--transport quic runs relay-fanout against a citadel this tool spawns");
    }
    if args.auth == AuthArg::Device && args.target != TargetKind::Citadel {
        bail!("--auth device needs --target citadel (the peers have no accounts)");
    }
    let opts = StartOptions {
        url: args.url.clone(),
        server_pid: args.server_pid,
        http_url: args.http_url.clone(),
        server_bin: args.server_bin.clone(),
        colyseus_dir: args.colyseus_dir.clone(),
        server_cpus: args.server_cpus.clone(),
        peak_connections: scenario.peak_connections(),
        lift_rate_limits: matches!(scenario, Scenario::RpcEcho(_)),
        quic,
        extra_config: match scenario {
            Scenario::PredictedInput(_) => bots::predicted::server_config(),
            _ => String::new(),
        },
    };
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t0 = Instant::now();
    let server = targets::start(args.target, &opts)?;
    let server_command = server.command.clone();
    // Pinned to one CPU (as compare.sh runs it), a current-thread runtime
    // saves the cross-thread wake-ups of a one-worker multi-thread one.
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let runtime = if one_cpu {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    }
    .context("cannot start the tokio runtime")?;
    let progress = Progress::new(args.quiet);
    let auth = match args.auth {
        AuthArg::Guest => AuthMode::Guest,
        AuthArg::Device => AuthMode::Device {
            prefix: format!("citadel-load-{started_unix}-{}", std::process::id()),
        },
    };
    // Lean bots speak WebSocket only: QUIC bots run the classic loop.
    let lean = args.bots == BotsArg::Lean && !quic;
    let mut report = runtime.block_on(async {
        match args.target {
            TargetKind::Citadel if let Some(q) = server.quic.clone() => {
                let c =
                    targets::quic::QuicConnector::new(&server.url, server.http_url.as_deref(), &q)?;
                drive(c, server, &scenario, progress, auth.clone(), lean).await
            }
            TargetKind::Citadel | TargetKind::Raw => {
                let c = targets::citadel::CitadelConnector::new(
                    &server.url,
                    server.http_url.as_deref(),
                )?;
                drive(c, server, &scenario, progress, auth.clone(), lean).await
            }
            TargetKind::Colyseus => {
                let c = targets::colyseus::ColyseusConnector::new(&server.url)?;
                drive(c, server, &scenario, progress, auth.clone(), lean).await
            }
        }
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    report.scenario_file = args.scenario.display().to_string();
    if !args.set.is_empty() {
        report
            .scenario_file
            .push_str(&format!(" --set {}", args.set.join(" --set ")));
    }
    report.target = format!("{:?}", args.target).to_lowercase();
    report.server_command = server_command;
    report.started_unix = started_unix;
    report.elapsed_seconds = t0.elapsed().as_secs_f64();
    if quic {
        report.notes.push(
            "QUIC bots: one citadel-client QuicClient (own endpoint and UDP socket) per bot, \
             join on streams, positions sent and received as datagrams (a lost datagram is a drop)"
                .into(),
        );
    }
    report.notes.push(match args.auth {
        AuthArg::Guest => "bots authenticated as guests".to_owned(),
        AuthArg::Device => "bots authenticated as device accounts (POST /v1/auth/device, \
                            create: true, one per connection) with their access tokens"
            .to_owned(),
    });
    if opts.lift_rate_limits && args.target == TargetKind::Citadel && args.url.is_none() {
        report.notes.push(
            "the generated config lifts transport.limits.messages_per_second (the 200/s default \
             policy would cap each connection)"
                .into(),
        );
    }
    print!("{}", report.render());
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    if args.check {
        report.check()?;
    }
    Ok(())
}

async fn drive<C: Connector>(
    connector: C,
    server: ServerHandle,
    scenario: &Scenario,
    progress: Progress,
    auth: AuthMode,
    lean: bool,
) -> anyhow::Result<Report> {
    let mut ctx = Ctx {
        connector: Arc::new(connector),
        auth,
        server,
        clock: Clock::new(),
        progress,
        ticks_per_second: procstat::clock_ticks_per_second(),
        lean,
    };
    let result = match scenario {
        Scenario::RelayFanout(s) => bots::fanout::run(&mut ctx, s).await,
        Scenario::IdleCapacity(s) => bots::idle::run(&mut ctx, s).await,
        Scenario::RpcEcho(s) => bots::rpc::run(&mut ctx, s).await,
        Scenario::HandshakeStorm(s) => bots::storm::run(&mut ctx, s).await,
        Scenario::ActorSync(s) => bots::actors::run(&mut ctx, s).await,
        Scenario::PredictedInput(s) => bots::predicted::run(&mut ctx, s).await,
    };
    ctx.progress.finish();
    // the server handle drops here, after every bot closed: the child is killed
    result
}
