//! Paths API users may name: programs the service runs for them (plugin check commands,
//! script channels) and files it reads for them (a private CA's certificates, `caFile`). They
//! come only from directories the configuration file names (`checks.pluginDirs`,
//! `notify.scriptDir`, `tls.caDirs`), resolved so that no symlink or `..` leads out of them.
//! Programs run as argv (never a shell line) in their own process group, with a scrubbed
//! environment, a deadline and capped output, confined as `sandbox` says; programs that exist
//! to run their arguments as another program (`WRAPPERS`) are refused.

use super::sandbox::Confinement;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// The search path a program sees: the system's own directories, nothing of the service's.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The directories one kind of program or file may come from, with the configuration key
/// naming them.
#[derive(Clone, Debug)]
pub struct AllowedDirs {
    key: &'static str,
    dirs: Vec<PathBuf>,
    confinement: Confinement,
}

impl AllowedDirs {
    /// Directories whose programs run unconfined (files to read, and the runner's own tests).
    pub fn new(key: &'static str, dirs: Vec<PathBuf>) -> Self {
        Self {
            key,
            dirs,
            confinement: Confinement::unconfined(),
        }
    }

    /// The same directories, their programs run under `confinement`.
    pub fn confined(mut self, confinement: Confinement) -> Self {
        self.confinement = confinement;
        self
    }

    /// Runs `r.program`, resolved from these directories, confined: it may execute only
    /// programs beneath them (and what `programs.allowExec` adds).
    pub async fn run(&self, r: Run<'_>) -> Result<Finished, RunError> {
        run(r, Some((&self.confinement, &self.dirs))).await
    }

    /// The configuration key, for messages (`checks.pluginDirs`).
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// The executable `program` names: a bare name or a relative path is looked up in each
    /// directory in turn, an absolute path must lie in one of them. Either way the file's real
    /// path (symlinks and `..` resolved) must stay inside a configured directory's real path.
    pub fn resolve(&self, program: &str) -> Result<PathBuf, String> {
        self.find(program, true).map_err(|r| r.to_string())
    }

    /// The readable file `path` names, found as `resolve` finds programs.
    pub fn resolve_file(&self, path: &str) -> Result<PathBuf, String> {
        self.find(path, false).map_err(|r| r.to_string())
    }

    /// Whether `program` may be saved in a document: it resolves, or it is not installed yet
    /// but names a place inside the directories (a plugin package installed later). A program
    /// outside them, or reached through a link out of them, is refused.
    pub fn admissible(&self, program: &str) -> Result<(), String> {
        self.admit(program, true)
    }

    /// `admissible` for a file to read.
    pub fn admissible_file(&self, path: &str) -> Result<(), String> {
        self.admit(path, false)
    }

    fn admit(&self, program: &str, executable: bool) -> Result<(), String> {
        match self.find(program, executable) {
            Ok(_) => Ok(()),
            Err(Refusal::Missing(why)) => {
                let given = Path::new(program);
                let climbs = given
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
                let inside = !given.is_absolute() || self.dirs.iter().any(|d| given.starts_with(d));
                if inside && !climbs {
                    Ok(())
                } else {
                    Err(Refusal::Outside(why).to_string())
                }
            }
            Err(other) => Err(other.to_string()),
        }
    }

    fn find(&self, program: &str, executable: bool) -> Result<PathBuf, Refusal> {
        let key = self.key;
        if program.trim().is_empty() {
            return Err(Refusal::Invalid("the program is empty".into()));
        }
        if program.contains('$') {
            return Err(Refusal::Invalid(format!(
                "{program:?} is written out in full, without macros or secrets"
            )));
        }
        if self.dirs.is_empty() {
            return Err(Refusal::Invalid(format!(
                "{key} names no directory, so none may be used (set it in the configuration file)"
            )));
        }
        let roots: Vec<PathBuf> = self
            .dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        let given = Path::new(program);
        let candidates: Vec<PathBuf> = if given.is_absolute() {
            vec![given.to_path_buf()]
        } else {
            self.dirs.iter().map(|d| d.join(given)).collect()
        };
        let mut outside = false;
        for candidate in candidates {
            let Ok(real) = std::fs::canonicalize(&candidate) else {
                continue;
            };
            if !roots.iter().any(|root| real.starts_with(root)) {
                outside = true;
                continue;
            }
            let usable = std::fs::metadata(&real)
                .is_ok_and(|m| m.is_file() && (!executable || m.permissions().mode() & 0o111 != 0));
            if usable {
                return Ok(real);
            }
        }
        let dirs = self
            .dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let what = if executable { "executable" } else { "file" };
        Err(if outside {
            Refusal::Outside(format!("{program:?} resolves outside {key} ({dirs})"))
        } else {
            Refusal::Missing(format!("no {what} {program:?} in {key} ({dirs})"))
        })
    }
}

/// Why a program is not run.
#[derive(Debug)]
enum Refusal {
    /// Nothing is written there (yet).
    Missing(String),
    /// It is, or leads, outside the directories.
    Outside(String),
    /// It cannot name a program at all.
    Invalid(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Missing(why) => f.write_str(why),
            Refusal::Outside(why) => f.write_str(why),
            Refusal::Invalid(why) => f.write_str(why),
        }
    }
}

/// Programs that exist to run the command line they are given (monitoring-plugins' `negate`
/// and `urlize`, `env`, `timeout`, shells and interpreters...): named as a plugin or script,
/// they would run any program, so a document naming one is refused at save and never run.
pub const WRAPPERS: [&str; 24] = [
    "negate", "urlize", "env", "timeout", "nice", "ionice", "nohup", "setsid", "stdbuf", "sudo",
    "su", "doas", "runuser", "xargs", "busybox", "sh", "bash", "dash", "ash", "ksh", "zsh", "perl",
    "python", "python3",
];

/// `check_by_ssh` options that run a local program (`-o ProxyCommand=...`, `-o
/// LocalCommand=...`) or read an ssh configuration that may (`-F`).
const SSH_RUNS_LOCALLY: [&str; 4] = ["-o", "--ssh-option", "-F", "--configfile"];

/// Why `program` with `args` would run a program of the caller's choosing, if it would: a
/// wrapper of `WRAPPERS`, or `check_by_ssh` with an option that runs one locally. Checked at
/// save on the command line as written, and again before running on the expanded one (an
/// `$ARGn$` may carry the option).
pub fn runs_its_arguments(program: &str, args: &[String]) -> Option<String> {
    let name = Path::new(program).file_name()?.to_str()?;
    if WRAPPERS.contains(&name) {
        return Some(format!(
            "{name} runs the command line it is given, so it is never run (docs/security.md)"
        ));
    }
    let ssh_option = |a: &String| {
        SSH_RUNS_LOCALLY.iter().any(|o| {
            a == o || (a.starts_with(o) && (o.len() == 2 || a[o.len()..].starts_with('=')))
        })
    };
    if name == "check_by_ssh" && args.iter().any(ssh_option) {
        return Some(
            "check_by_ssh with -o or -F can run a local program, so it is never run with them (docs/security.md)"
                .into(),
        );
    }
    None
}

/// Every kind of allowed directory, as the configuration names them.
#[derive(Clone, Debug)]
pub struct Allowed {
    /// `checks.pluginDirs`: plugin check commands.
    pub plugins: AllowedDirs,
    /// `notify.scriptDir`: script channels.
    pub scripts: AllowedDirs,
    /// `tls.caDirs`: the `caFile` of channels and event sources.
    pub ca_files: AllowedDirs,
}

/// What to run: the resolved program, its arguments, the variables it sees besides `PATH`,
/// its standard input, its deadline and how much of its output is kept.
pub struct Run<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: Vec<(&'static str, String)>,
    pub stdin: Option<String>,
    pub timeout: Duration,
    pub output_cap: usize,
}

/// How a program ended: its status and the first `output_cap` bytes of each stream.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run {0}: {1}")]
    Spawn(String, std::io::Error),
    #[error("ran longer than {0:?}")]
    Timeout(Duration),
}

/// Reads a stream to its end, keeping at most `cap` bytes (the rest is read and dropped, so
/// the program is never blocked on a full pipe).
async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut stream) = stream else {
        return kept;
    };
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// Runs a program, confined to run only beneath `roots` where a confinement is given; at its
/// deadline its whole process group is killed.
async fn run(
    r: Run<'_>,
    confined: Option<(&Confinement, &[PathBuf])>,
) -> Result<Finished, RunError> {
    let mut cmd = tokio::process::Command::new(r.program);
    cmd.args(r.args)
        .env_clear()
        .env("PATH", PATH)
        .envs(r.env)
        .stdin(if r.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some((confinement, roots)) = confined {
        confinement
            .apply(&mut cmd, r.program, roots)
            .map_err(|e| RunError::Spawn(r.program.display().to_string(), e))?;
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RunError::Spawn(r.program.display().to_string(), e))?;
    let group = child.id();
    let stdin = child.stdin.take();
    let input = r.stdin;
    let feed = async move {
        if let (Some(mut pipe), Some(text)) = (stdin, input) {
            // A program that does not read its input is its own business.
            let _ = pipe.write_all(text.as_bytes()).await;
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let cap = r.output_cap;
    let work = async {
        let ((), stdout, stderr, status) = tokio::join!(
            feed,
            read_capped(stdout, cap),
            read_capped(stderr, cap),
            child.wait()
        );
        (stdout, stderr, status)
    };
    match tokio::time::timeout(r.timeout, work).await {
        Ok((stdout, stderr, Ok(status))) => Ok(Finished {
            status,
            stdout,
            stderr,
        }),
        Ok((_, _, Err(e))) => Err(RunError::Spawn(r.program.display().to_string(), e)),
        Err(_) => {
            kill_group(group);
            Err(RunError::Timeout(r.timeout))
        }
    }
}

/// Kills what a program started too (a plugin's own children keep its pipes open).
fn kill_group(group: Option<u32>) {
    if let Some(pid) = group.and_then(|g| i32::try_from(g).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path) {
        std::fs::write(path, "#!/bin/sh\necho ran\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn programs_resolve_only_inside_their_directories() {
        let root = tempfile::tempdir().unwrap();
        let plugins = root.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        executable(&plugins.join("check_ok"));
        std::fs::write(plugins.join("not_executable"), "x").unwrap();
        executable(&root.path().join("outside"));
        std::os::unix::fs::symlink(root.path().join("outside"), plugins.join("escape")).unwrap();
        let dirs = AllowedDirs::new("checks.pluginDirs", vec![plugins.clone()]);
        let real = std::fs::canonicalize(plugins.join("check_ok")).unwrap();
        assert_eq!(dirs.resolve("check_ok").unwrap(), real);
        assert_eq!(
            dirs.resolve(plugins.join("check_ok").to_str().unwrap())
                .unwrap(),
            real
        );
        for (program, why) in [
            ("escape", "resolves outside"),
            ("../outside", "resolves outside"),
            ("/bin/sh", "resolves outside"),
            ("not_executable", "no executable"),
            ("missing", "no executable"),
            ("$ARG1$", "without macros"),
            ("", "empty"),
        ] {
            let e = dirs.resolve(program).unwrap_err();
            assert!(e.contains(why), "{program}: {e}");
        }
        assert!(dirs.admissible("check_later").is_ok(), "installed later");
        assert!(
            dirs.admissible(plugins.join("check_later").to_str().unwrap())
                .is_ok()
        );
        for program in [
            "/bin/sh",
            "/nowhere/check_x",
            "../outside",
            "escape",
            "sub/../../x",
        ] {
            assert!(dirs.admissible(program).is_err(), "{program}");
        }
        std::fs::write(plugins.join("ca.pem"), "x").unwrap();
        assert!(
            dirs.resolve_file("ca.pem").is_ok(),
            "a file need not be executable"
        );
        assert!(dirs.resolve("ca.pem").is_err(), "a program must be");
        assert!(dirs.admissible_file("/etc/shadow").is_err());
        let none = AllowedDirs::new("notify.scriptDir", Vec::new());
        assert!(
            none.resolve("check_ok")
                .unwrap_err()
                .contains("names no directory")
        );
    }

    #[test]
    fn wrappers_that_run_their_arguments_are_named() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (program, given) in [
            ("negate", args(&["/bin/sh", "-c", "id"])),
            (
                "/usr/lib/nagios/plugins/urlize",
                args(&["http://x", "/bin/sh"]),
            ),
            (
                "check_by_ssh",
                args(&["-H", "h", "-o", "ProxyCommand=sh -c id"]),
            ),
            ("check_by_ssh", args(&["-H", "h", "-oProxyCommand=id"])),
            ("check_by_ssh", args(&["--ssh-option=LocalCommand=id"])),
            ("check_by_ssh", args(&["-F", "/tmp/cfg"])),
        ] {
            assert!(
                runs_its_arguments(program, &given).is_some(),
                "{program} {given:?}"
            );
        }
        for (program, given) in [
            ("check_tcp", args(&["-H", "h", "-o"])),
            ("check_by_ssh", args(&["-H", "h", "-C", "uptime"])),
            ("check_by_ssh", args(&["--optional"])),
        ] {
            assert!(
                runs_its_arguments(program, &given).is_none(),
                "{program} {given:?}"
            );
        }
    }

    /// Needs a kernel with Landlock (5.13 and later): elsewhere it says so and checks nothing.
    #[tokio::test]
    async fn confined_programs_reach_neither_protected_paths_nor_other_programs() {
        let root = tempfile::tempdir().unwrap();
        let (plugins, data) = (root.path().join("plugins"), root.path().join("data"));
        std::fs::create_dir(&plugins).unwrap();
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("master.key"), "0123456789abcdef").unwrap();
        let probe = plugins.join("check_probe");
        std::fs::write(
            &probe,
            "#!/bin/sh\n\
             read -r key < \"$1\" && echo \"read $key\" || echo 'no read'\n\
             echo x > \"$1.copy\" 2>/dev/null && echo wrote || echo 'no write'\n\
             \"$2\" >/dev/null 2>&1 && echo ran || echo 'no exec'\n\
             echo ok > \"$3\" && read -r back < \"$3\" && echo \"elsewhere $back\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let confinement = Confinement::new(&super::super::sandbox::ConfinementConfig {
            protect: vec![data.clone()],
            ..Default::default()
        })
        .unwrap();
        if !confinement.confined() {
            eprintln!("SKIPPED: {}", confinement.describe());
            return;
        }
        let dirs =
            AllowedDirs::new("checks.pluginDirs", vec![plugins.clone()]).confined(confinement);
        let args = [
            data.join("master.key").display().to_string(),
            "/usr/bin/id".to_string(),
            plugins.join("scratch").display().to_string(),
        ];
        let finished = dirs
            .run(Run {
                program: &dirs.resolve("check_probe").unwrap(),
                args: &args,
                env: Vec::new(),
                stdin: None,
                timeout: Duration::from_secs(10),
                output_cap: 4096,
            })
            .await
            .unwrap();
        let out = String::from_utf8_lossy(&finished.stdout);
        assert_eq!(out, "no read\nno write\nno exec\nelsewhere ok\n", "{out}");
        assert!(!data.join("master.key.copy").exists());
    }

    #[tokio::test]
    async fn runs_with_a_scrubbed_environment_capped_output_and_a_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("prog");
        std::fs::write(
            &program,
            "#!/bin/sh\nenv | sort\nhead -c 100000 /dev/zero | tr '\\0' x\nsleep \"$1\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let finished = run(
            Run {
                program: &program,
                args: &["0".to_string()],
                env: vec![("SVC_ALERT_ID", "a1".into())],
                stdin: None,
                timeout: Duration::from_secs(10),
                output_cap: 1000,
            },
            None,
        )
        .await
        .unwrap();
        let out = String::from_utf8_lossy(&finished.stdout);
        assert_eq!(finished.stdout.len(), 1000);
        assert!(out.contains("SVC_ALERT_ID=a1"), "{out}");
        assert!(out.contains("PATH=/usr/local/bin:/usr/bin:/bin"), "{out}");
        assert!(!out.contains("HOME="), "the environment is scrubbed: {out}");
        let slow = run(
            Run {
                program: &program,
                args: &["30".to_string()],
                env: Vec::new(),
                stdin: None,
                timeout: Duration::from_millis(300),
                output_cap: 10,
            },
            None,
        )
        .await;
        assert!(matches!(slow, Err(RunError::Timeout(_))));
    }
}
