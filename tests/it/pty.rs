//! Serial pseudo-terminal pairs from socat: the server opens one end as its device, a
//! simulated peer the other.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PtyPair {
    child: Option<Child>,
    /// The end the server opens.
    pub ours: PathBuf,
    /// The end the simulated peer opens.
    pub theirs: PathBuf,
    _dir: tempfile::TempDir,
}

/// Whether socat is installed; CI installs it and must not skip.
fn socat_installed() -> bool {
    let found = Command::new("socat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found || std::env::var_os("CI").is_none(),
        "socat is required in CI (.ci/run installs it)"
    );
    found
}

impl PtyPair {
    /// A new pair, or `None` (with a note) where socat is not installed.
    pub fn open(test: &str) -> Option<PtyPair> {
        if !socat_installed() {
            eprintln!("SKIPPED {test}: socat is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut pair = PtyPair {
            child: None,
            ours: dir.path().join("svc-tty"),
            theirs: dir.path().join("peer-tty"),
            _dir: dir,
        };
        pair.plug();
        Some(pair)
    }

    /// (Re)creates the pair under the same paths, as a USB modem re-enumerating does.
    pub fn plug(&mut self) {
        self.unplug();
        let child = Command::new("socat")
            .arg(format!("pty,raw,echo=0,link={}", self.ours.display()))
            .arg(format!("pty,raw,echo=0,link={}", self.theirs.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while !(self.ours.exists() && self.theirs.exists()) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "socat made no ptys"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Takes the device away: both ends close and the paths disappear.
    pub fn unplug(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.ours);
        let _ = std::fs::remove_file(&self.theirs);
    }
}

impl Drop for PtyPair {
    fn drop(&mut self) {
        self.unplug();
    }
}
