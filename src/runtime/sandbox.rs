//! Confinement of the programs the service runs for API users (plugin checks, script channels):
//! whatever their arguments, they execute nothing outside the directories the configuration
//! names and read nothing of the server's own files (the data directory with its master key,
//! the configuration file, the TLS key).
//!
//! On Linux 5.13 and later this is a Landlock ruleset the child restricts itself to before its
//! `execve`: every file-system right everywhere but in the protected paths, and execution only
//! of the program, what its `#!` line or ELF header names as its interpreter, the program's
//! own directories and `programs.allowExec`. Landlock also keeps the child from tracing the
//! server (no `/proc/<pid>/mem` or `environ`) and, from ABI 6 on, from signalling it. A named
//! `programs.runAs` user (the server started as root) is applied besides, or alone where the
//! kernel has no Landlock. Neither available: the programs run unconfined, which the server
//! says at start, in `/system/info` and in `svc doctor`.
//!
//! This file and `memory.rs` are the crate's only `unsafe`: the three Landlock system calls and
//! `prctl`, made in the forked child with nothing but system calls (no allocation, no lock).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// The rights a rule on a file (not a directory) may carry.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL` (ABI 6).
const SCOPE_ALL: u64 = 0b11;
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The file-system rights an ABI version knows (1: thirteen, 2: `REFER`, 3: `TRUNCATE`,
/// 5: `IOCTL_DEV`): all of them are handled, so whatever is not granted is denied.
fn handled_rights(abi: u32) -> u64 {
    let mut rights = (1 << 13) - 1;
    if abi >= 2 {
        rights |= REFER;
    }
    if abi >= 3 {
        rights |= TRUNCATE;
    }
    if abi >= 5 {
        rights |= IOCTL_DEV;
    }
    rights
}

/// The kernel's Landlock ABI version; `None` where it has none or it is disabled.
fn landlock_abi() -> Option<u32> {
    // SAFETY: the version query takes no attribute and writes nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).ok().filter(|v| *v >= 1)
}

/// What the configuration says about confinement (`programs.*`), and the paths to protect.
#[derive(Clone, Debug, Default)]
pub struct ConfinementConfig {
    /// Paths no program may read or write (the data directory, the configuration file...).
    pub protect: Vec<PathBuf>,
    /// Programs or directories of programs that may run besides the program itself
    /// (`programs.allowExec`: the helpers a plugin runs, such as `/usr/bin/ping`).
    pub allow_exec: Vec<PathBuf>,
    /// The user programs run as (`programs.runAs`).
    pub run_as: Option<String>,
    /// Turns Landlock off (`programs.landlock: false`), for a kernel whose Landlock misbehaves.
    pub no_landlock: bool,
}

/// How the programs run: confined by Landlock, by a user, by both, or not at all.
#[derive(Clone, Debug)]
pub struct Confinement(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    abi: Option<u32>,
    /// Every path outside the protected ones, as (path, is a directory): the rules that grant
    /// all but execution. Found once at start by walking down to each protected path.
    open: Vec<(PathBuf, bool)>,
    allow_exec: Vec<PathBuf>,
    user: Option<RunAs>,
}

#[derive(Debug)]
struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

impl Confinement {
    /// Confinement as configured; an unknown `runAs` user, or one the server cannot switch to
    /// (it does not start as root), is an error at start.
    pub fn new(config: &ConfinementConfig) -> Result<Self, String> {
        let user = match &config.run_as {
            None => None,
            Some(name) => {
                let user = nix::unistd::User::from_name(name)
                    .map_err(|e| format!("programs.runAs: {name}: {e}"))?
                    .ok_or_else(|| format!("programs.runAs: no user {name:?}"))?;
                if !nix::unistd::geteuid().is_root() {
                    return Err(format!(
                        "programs.runAs: {name}: the server must start as root to run programs as another user"
                    ));
                }
                Some(RunAs {
                    name: name.clone(),
                    uid: user.uid.as_raw(),
                    gid: user.gid.as_raw(),
                })
            }
        };
        let abi = if config.no_landlock {
            None
        } else {
            landlock_abi()
        };
        let protect: Vec<PathBuf> = config
            .protect
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let mut open = Vec::new();
        if abi.is_some() {
            open_paths(Path::new("/"), &protect, &mut open);
        }
        Ok(Self(Arc::new(Inner {
            abi,
            open,
            allow_exec: config.allow_exec.clone(),
            user,
        })))
    }

    /// No confinement at all (tests of the runner itself).
    pub fn unconfined() -> Self {
        Self(Arc::new(Inner {
            abi: None,
            open: Vec::new(),
            allow_exec: Vec::new(),
            user: None,
        }))
    }

    /// Whether programs are confined at all.
    pub fn confined(&self) -> bool {
        self.0.abi.is_some() || self.0.user.is_some()
    }

    /// How, in a sentence: for the log at start, `/system/info` and `svc doctor`.
    pub fn describe(&self) -> String {
        let user = self.0.user.as_ref().map(|u| &u.name);
        match (self.0.abi, user) {
            (Some(abi), Some(user)) => format!("confined by Landlock (ABI {abi}), as user {user}"),
            (Some(abi), None) => format!("confined by Landlock (ABI {abi})"),
            (None, Some(user)) => format!("confined to user {user} (no Landlock in this kernel)"),
            (None, None) => "unconfined: this kernel has no Landlock (Linux 5.13 or later) and programs.runAs names no user".into(),
        }
    }

    /// Makes `cmd`, which runs `program` found in `roots`, confined: switches the user and has
    /// the child restrict itself to a Landlock ruleset made here, in the parent, before the
    /// fork. A ruleset that cannot be made or applied fails the spawn: nothing runs unconfined
    /// where confinement was promised.
    pub fn apply(
        &self,
        cmd: &mut tokio::process::Command,
        program: &Path,
        roots: &[PathBuf],
    ) -> std::io::Result<()> {
        if let Some(user) = &self.0.user {
            cmd.uid(user.uid).gid(user.gid);
        }
        let Some(abi) = self.0.abi else {
            return Ok(());
        };
        let ruleset = self.ruleset(abi, program, roots)?;
        let fd = ruleset.as_raw_fd();
        // SAFETY: the closure runs in the forked child before `execve` and makes only system
        // calls (no allocation, no lock); `ruleset` moves into it and stays open until the
        // command is dropped, after the fork.
        unsafe {
            cmd.pre_exec(move || {
                let _keep = &ruleset;
                restrict_self(fd)
            });
        }
        Ok(())
    }

    fn ruleset(&self, abi: u32, program: &Path, roots: &[PathBuf]) -> std::io::Result<OwnedFd> {
        let handled = handled_rights(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
            handled_access_net: 0,
            scoped: SCOPE_ALL,
        };
        // Before ABI 6 the kernel takes only the first field (a shorter struct is the older
        // ABI's); from 6 on, all three, so the child cannot signal the server either.
        let size = if abi >= 6 {
            std::mem::size_of::<RulesetAttr>()
        } else {
            std::mem::size_of::<u64>()
        };
        // SAFETY: `attr` is a valid ruleset attribute of at least `size` bytes.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        let fd = i32::try_from(fd).map_err(|_| std::io::Error::last_os_error())?;
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor (close-on-exec) to us alone.
        let ruleset = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let all_but_execute = handled & !EXECUTE;
        for (path, dir) in &self.0.open {
            // A path gone since the start grants nothing; it is not an error.
            let _ = add_rule(&ruleset, path, all_but_execute, *dir);
        }
        let run = EXECUTE | READ_FILE | READ_DIR;
        let mut executables: Vec<PathBuf> = roots.to_vec();
        executables.extend(self.0.allow_exec.iter().cloned());
        executables.push(program.to_path_buf());
        interpreters(program, 0, &mut executables);
        for path in &executables {
            let dir = path.is_dir();
            let _ = add_rule(&ruleset, path, run & handled, dir);
        }
        Ok(ruleset)
    }
}

/// Grants `rights` beneath `path` (only the file rights on a file).
fn add_rule(ruleset: &OwnedFd, path: &Path, rights: u64, dir: bool) -> std::io::Result<()> {
    let parent = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)?;
    let attr = PathBeneathAttr {
        allowed_access: if dir { rights } else { rights & FILE_RIGHTS },
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: both descriptors are open and `attr` is a valid path-beneath attribute.
    let done = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if done < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// In the child: restricts itself to the ruleset. Unprivileged (no `CAP_SYS_ADMIN`), Landlock
/// asks for `no_new_privs` first; a privileged server's child keeps set-user-ID plugins
/// (`check_icmp`) working, still inside the ruleset.
fn restrict_self(ruleset: i32) -> std::io::Result<()> {
    // SAFETY: plain system calls on an open descriptor.
    unsafe {
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) == 0 {
            return Ok(());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every entry beneath `dir` that is not protected and holds nothing protected, walking into
/// the directories that do. Links are passed over: what they lead to is granted, or not, where
/// it lies. A directory holding a protected path grants nothing itself: nothing new can be
/// made directly in it.
fn open_paths(dir: &Path, protect: &[PathBuf], out: &mut Vec<(PathBuf, bool)>) {
    if protect.is_empty() {
        out.push((dir.to_path_buf(), true));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_symlink() || protect.contains(&path) {
            continue;
        }
        if kind.is_dir() && protect.iter().any(|p| p.starts_with(&path)) {
            open_paths(&path, protect, out);
        } else {
            out.push((path, kind.is_dir()));
        }
    }
}

/// The search path a `#!/usr/bin/env name` line looks `name` up in (the children's `PATH`).
const SEARCH: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// What executing `program` executes besides: the interpreter of a `#!` line (and the program
/// `env` starts), and the ELF interpreter (the dynamic loader) of each, a few levels deep.
fn interpreters(program: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 {
        return;
    }
    let mut head = [0u8; 4096];
    let Ok(n) = std::fs::File::open(program).and_then(|mut f| {
        use std::io::Read;
        f.read(&mut head)
    }) else {
        return;
    };
    let head = &head[..n];
    let found = if head.starts_with(b"#!") {
        shebang(head)
    } else {
        elf_interpreter(head).into_iter().collect()
    };
    for path in found {
        if !out.contains(&path) {
            out.push(path.clone());
            interpreters(&path, depth + 1, out);
        }
    }
}

/// The programs a `#!` line runs: its interpreter, and for `env`, the program it looks up.
fn shebang(head: &[u8]) -> Vec<PathBuf> {
    let line = head[2..].split(|b| *b == b'\n').next().unwrap_or_default();
    let mut words = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let Some(interpreter) = words.next() else {
        return Vec::new();
    };
    let interpreter = PathBuf::from(OsString::from_vec(interpreter.to_vec()));
    let mut found = vec![interpreter.clone()];
    if interpreter.file_name().is_some_and(|n| n == "env")
        && let Some(name) = words.find(|w| !w.starts_with(b"-"))
    {
        let name = PathBuf::from(OsString::from_vec(name.to_vec()));
        if name.is_absolute() {
            found.push(name);
        } else if let Some(path) = SEARCH
            .iter()
            .map(|d| Path::new(d).join(&name))
            .find(|p| p.is_file())
        {
            found.push(path);
        }
    }
    found
}

/// The `PT_INTERP` path of an ELF file's header (32 or 64 bits, either byte order).
fn elf_interpreter(head: &[u8]) -> Option<PathBuf> {
    if head.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = *head.get(4)? == 2;
    let little = *head.get(5)? == 1;
    let uint = |at: usize, len: usize| -> Option<u64> {
        let bytes = head.get(at..at + len)?;
        let mut v = 0u64;
        for i in 0..len {
            let b = if little { bytes[len - 1 - i] } else { bytes[i] };
            v = (v << 8) | u64::from(b);
        }
        Some(v)
    };
    let (phoff, phentsize, phnum) = if wide {
        (uint(0x20, 8)?, uint(0x36, 2)?, uint(0x38, 2)?)
    } else {
        (uint(0x1c, 4)?, uint(0x2a, 2)?, uint(0x2c, 2)?)
    };
    for i in 0..phnum {
        let at = usize::try_from(phoff + i * phentsize).ok()?;
        const PT_INTERP: u64 = 3;
        if uint(at, 4)? != PT_INTERP {
            continue;
        }
        let (offset, size) = if wide {
            (uint(at + 8, 8)?, uint(at + 32, 8)?)
        } else {
            (uint(at + 4, 4)?, uint(at + 16, 4)?)
        };
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        let raw = head.get(start..end)?;
        let raw = raw.split(|b| *b == 0).next()?;
        return Some(PathBuf::from(OsString::from_vec(raw.to_vec())));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_of_scripts_and_elf_files() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho\n").unwrap();
        let mut found = Vec::new();
        interpreters(&script, 0, &mut found);
        assert_eq!(found.first(), Some(&PathBuf::from("/bin/sh")), "{found:?}");
        let env = dir.path().join("e");
        std::fs::write(&env, "#!/usr/bin/env -S sh -x\n").unwrap();
        assert_eq!(
            shebang(&std::fs::read(&env).unwrap())[0],
            PathBuf::from("/usr/bin/env")
        );
        // This very test binary is an ELF file; a static one names no interpreter.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let loader = elf_interpreter(&me[..me.len().min(4096)]);
        if let Some(loader) = loader {
            assert!(loader.is_absolute(), "{loader:?}");
            assert!(loader.to_string_lossy().contains("ld"), "{loader:?}");
        }
        assert_eq!(
            elf_interpreter(b"\x7fELF"),
            None,
            "a short header names nothing"
        );
        assert_eq!(elf_interpreter(b"#!/bin/sh"), None);
    }

    #[test]
    fn the_walk_leaves_out_only_the_protected_paths() {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        for d in ["a/data", "a/other", "b"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/file"), "x").unwrap();
        std::fs::write(base.join("b/svc.yaml"), "x").unwrap();
        std::fs::write(base.join("b/beside"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("a/data"), base.join("a/link")).unwrap();
        let mut out = Vec::new();
        open_paths(
            &base,
            &[base.join("a/data"), base.join("b/svc.yaml")],
            &mut out,
        );
        out.sort();
        assert_eq!(
            out,
            vec![
                (base.join("a/file"), false),
                (base.join("a/other"), true),
                (base.join("b/beside"), false),
            ]
        );
    }

    #[test]
    fn every_abi_handles_its_rights() {
        assert_eq!(handled_rights(1), (1 << 13) - 1);
        assert_eq!(handled_rights(3) & TRUNCATE, TRUNCATE);
        assert_eq!(handled_rights(4) & IOCTL_DEV, 0);
        assert_eq!(handled_rights(7) & IOCTL_DEV, IOCTL_DEV);
    }
}
