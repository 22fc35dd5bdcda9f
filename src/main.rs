//! The `svc` binary: server and command-line client in one (CONTRACT 1).

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use svc::config::{Config, Overrides};

// glibc's allocator spent a quarter of the results pipeline's CPU time in malloc and free
// (perf, `cargo bench --bench results`); musl's, in the static build, is slower still.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "svc",
    about = "Monitoring and alerting appliance",
    disable_version_flag = true
)]
struct Cli {
    /// Print the version string and exit.
    #[arg(long = "version")]
    version: bool,
    #[command(flatten)]
    global: svc::cli::Global,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service.
    Serve {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[arg(long)]
        listen: Option<String>,
        /// `auto` (HTTPS, self-signed unless configured) or `off` (plain HTTP).
        #[arg(long)]
        tls: Option<String>,
    },
    /// Mint the bootstrap-admin token while the server is stopped; prints only its secret.
    Bootstrap {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Restore a backup (`svc backup`) into an empty data directory, with no server running on
    /// it; the restored audit chain is verified. Example: `svc restore --from site.tar --data-dir /var/lib/svc`.
    Restore {
        /// The archive `svc backup` wrote.
        #[arg(long = "from")]
        from: PathBuf,
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Move the main database of a stopped server's data directory (redb), its events and
    /// metric series into an empty PostgreSQL database, and verify its audit chain there. Example: `svc migrate
    /// --from-data-dir /var/lib/svc --to postgres://svc@db/svc`.
    #[cfg(feature = "postgres")]
    Migrate {
        #[arg(long)]
        from_data_dir: PathBuf,
        /// `postgres://user:password@host:port/database` (or SERVICE_STORAGE_POSTGRES_URL).
        #[arg(long, env = "SERVICE_STORAGE_POSTGRES_URL", hide_env_values = true)]
        to: String,
        /// `disable`, `prefer` or `require` (the server's `storage.postgres.tlsMode`); by default
        /// the URL's `sslmode`, else `prefer`.
        #[arg(long, default_value = "")]
        tls_mode: String,
        /// A private CA's PEM certificates for the database server's certificate.
        #[arg(long)]
        ca_file: Option<String>,
    },
    /// Print the version string.
    Version,
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print a shell completion script: `svc completion bash > /etc/bash_completion.d/svc`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), for packages: `svc man > svc.1`.
    #[command(hide = true)]
    Man,
    #[command(flatten)]
    Client(svc::cli::ClientCommand),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate the configuration; exit 1 naming each problem.
    Check {
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// The log filter is `SVC_LOG`, else `RUST_LOG`, else `info`. With `SVC_LOG_SPANS` set (not
/// `0`), every span the filter admits logs a line when it closes with its busy and idle time:
/// `SVC_LOG=svc=debug SVC_LOG_SPANS=1` follows a request through its transactions, and a
/// consumer batch through its transactions and deliveries.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SVC_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let spans = match std::env::var("SVC_LOG_SPANS") {
        Ok(v) if !v.is_empty() && v != "0" => tracing_subscriber::fmt::format::FmtSpan::CLOSE,
        _ => tracing_subscriber::fmt::format::FmtSpan::NONE,
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn load(overrides: &Overrides) -> anyhow::Result<Config> {
    Ok(Config::load(overrides, &env)?)
}

/// Threads for blocking work other than the store's (its reads have threads of their own,
/// `store/readers.rs`): name lookups, file I/O, password hashes. Each thread keeps its own
/// allocator pages: a burst that grew the pool to tokio's default (512) held tens of MiB for
/// nothing on a 1 GB gateway.
const BLOCKING_THREADS: usize = 16;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()?)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => {
            anyhow::bail!("no command given; try `svc --help`");
        }
        Some(Command::Version) => println!("{}", svc::model::VERSION),
        Some(Command::Serve {
            config,
            data_dir,
            listen,
            tls,
        }) => {
            let cfg = load(&Overrides {
                config,
                data_dir,
                listen,
                tls,
            })?;
            init_logging();
            let rt = runtime()?;
            let served = rt.block_on(svc::app::serve(cfg));
            // Blocking work still running (a rule evaluation past its budget, a plugin) does
            // not hold the exit: everything is flushed and closed by now.
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
        }
        Some(Command::Bootstrap { config, data_dir }) => {
            let cfg = load(&Overrides {
                config,
                data_dir,
                ..Default::default()
            })?;
            let secret = runtime()?.block_on(svc::app::bootstrap(&cfg))?;
            println!("{secret}");
        }
        Some(Command::Restore { from, data_dir }) => {
            let done = runtime()?.block_on(svc::app::restore(&from, &data_dir))?;
            println!("{done}");
        }
        #[cfg(feature = "postgres")]
        Some(Command::Migrate {
            from_data_dir,
            to,
            tls_mode,
            ca_file,
        }) => {
            let target = svc::store::kv::pg::Target {
                url: to,
                tls_mode,
                ca_file,
                pool_size: 1,
            };
            let done = runtime()?.block_on(svc::app::migrate(&from_data_dir, target))?;
            println!("{done}");
        }
        Some(Command::Completion { shell }) => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "svc", &mut std::io::stdout());
        }
        Some(Command::Man) => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
        }
        Some(Command::Client(command)) => {
            if let Err(e) = svc::cli::run(cli.global, command) {
                anyhow::bail!("{e}");
            }
        }
        Some(Command::Config {
            command: ConfigCommand::Check { config },
        }) => {
            load(&Overrides {
                config,
                ..Default::default()
            })?;
            println!("configuration ok");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if cli.version {
        println!("{}", svc::model::VERSION);
        return ExitCode::SUCCESS;
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("svc: {e:#}");
            ExitCode::from(1)
        }
    }
}
