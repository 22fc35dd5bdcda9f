//! The suite's one switch between storage backends: with `SVC_TEST_STORAGE=postgres`, every
//! server the tests start keeps its main database in PostgreSQL instead of a redb file. The
//! cluster is a throwaway one (Debian's `postgresql`, `initdb` and `pg_ctl`; apt starts no
//! service here), made once per test run and removed when the run ends; each data directory
//! gets a database of its own, kept for the restarts on that directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether this run keeps the servers' stores in PostgreSQL.
pub fn enabled() -> bool {
    cfg!(feature = "postgres") && std::env::var("SVC_TEST_STORAGE").as_deref() == Ok("postgres")
}

struct Cluster {
    port: u16,
    bin: PathBuf,
    /// The private CA whose certificate for 127.0.0.1 the cluster serves TLS with.
    ca: PathBuf,
}

/// The newest PostgreSQL 15 or later Debian installed.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(v, bin)| *v >= 15 && bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `program` as the cluster's owner: the `postgres` account when the tests run as root, which
/// PostgreSQL refuses to run as.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let bin = bin_dir().expect(
            "SVC_TEST_STORAGE=postgres needs Debian's postgresql 15 or later (.ci/run installs it)",
        );
        let dir = std::env::temp_dir().join(format!("svc-test-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            assert!(
                Command::new("chown")
                    .arg("postgres")
                    .arg(&dir)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let data = dir.join("data");
        let made = as_owner(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "svc", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(made.success(), "initdb failed");
        let (ca, cert, key) = super::support::private_ca(&dir);
        for file in [&cert, &key] {
            if is_root() {
                assert!(
                    Command::new("chown")
                        .arg("postgres")
                        .arg(file)
                        .status()
                        .unwrap()
                        .success()
                );
            }
        }
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let port = super::support::free_port();
        let started = as_owner(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=400 \
                 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                dir.display(),
                cert.display(),
                key.display()
            ))
            .arg("-l")
            .arg(dir.join("log"))
            .args(["-w", "start"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(started.success(), "pg_ctl start failed");
        // Stops the cluster and removes it once this test process is gone, however it ends.
        let stop = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {owner}{pg_ctl} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            owner = if is_root() {
                "runuser -u postgres -- "
            } else {
                ""
            },
            pg_ctl = bin.join("pg_ctl").display(),
            data = data.display(),
            dir = dir.display(),
        );
        let detached = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "setsid sh -c '{stop}' </dev/null >/dev/null 2>&1 &"
            ))
            .status()
            .unwrap();
        assert!(detached.success());
        Cluster { port, bin, ca }
    })
}

/// The database URL of the server on `data`: a new database on the first start there, the
/// same one on every restart. A data directory that already holds a redb store (a restored
/// backup, a fixture, one a test wrote) is moved into its new database first, as an operator
/// does with `svc migrate`.
pub fn url_for(data: &Path) -> String {
    let marker = data.with_extension("pgdb");
    let fresh = !marker.exists();
    let url = database_for(data);
    if fresh && data.join("svc.redb").exists() {
        let out = Command::new(super::support::BIN)
            .args(["migrate", "--from-data-dir"])
            .arg(data)
            .args(["--to", &url, "--tls-mode", "disable"])
            .env("SVC_CRYPTO_POLICY", "fast")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "svc migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    url
}

fn database_for(data: &Path) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let cluster = cluster();
    let marker = data.with_extension("pgdb");
    let name = match std::fs::read_to_string(&marker) {
        Ok(name) => name,
        Err(_) => {
            let name = format!("t{}", NEXT.fetch_add(1, Ordering::SeqCst));
            let made = Command::new(cluster.bin.join("psql"))
                .args(["-h", "127.0.0.1", "-U", "svc", "-d", "postgres", "-q"])
                .args(["-p", &cluster.port.to_string()])
                .args(["-c", &format!("CREATE DATABASE {name}")])
                .status()
                .unwrap();
            assert!(made.success(), "CREATE DATABASE {name} failed");
            std::fs::write(&marker, &name).unwrap();
            name
        }
    };
    format!(
        "postgres://svc@127.0.0.1:{}/{name}?sslmode=disable",
        cluster.port
    )
}

fn psql(data: &Path, sql: &str) -> String {
    let cluster = cluster();
    let out = Command::new(cluster.bin.join("psql"))
        .arg(url_for(data))
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Every row of the store table `table` of the server on `data`, in key order, as stored:
/// keys in their order-preserving form (integers big-endian), values as redb keeps them.
pub fn rows(data: &Path, table: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    psql(
        data,
        &format!(
            "SELECT encode(k, 'hex') || '|' || encode(v, 'hex') FROM \"kv_{table}\" ORDER BY k"
        ),
    )
    .lines()
    .filter_map(|l| l.split_once('|'))
    .map(|(k, v)| (unhex(k), unhex(v)))
    .collect()
}

/// Stores `value` under `key` (stored form) in the store table `table`, behind the server's back.
pub fn put(data: &Path, table: &str, key: &[u8], value: &[u8]) {
    psql(
        data,
        &format!(
            "INSERT INTO \"kv_{table}\" (k, v) VALUES (decode('{}', 'hex'), decode('{}', 'hex')) \
             ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            hex(key),
            hex(value)
        ),
    );
}

/// TLS to the database is rustls checking the server's certificate: trusted through
/// `storage.postgres.caFile`, the store serves over an encrypted connection; with the system
/// roots only, which do not know the private CA, the store stays offline and says why.
#[tokio::test]
async fn the_database_connection_is_tls_with_a_checked_certificate() {
    use super::support::{Opts, Server, config_args};
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let ca = &cluster().ca;
    let dir = tempfile::tempdir().unwrap();
    let trusted = dir.path().join("trusted");
    std::fs::create_dir_all(&trusted).unwrap();
    let yaml = format!(
        "storage: {{backend: postgres, postgres: {{tlsMode: require, caFile: {}}}}}\n",
        ca.display()
    );
    let s = Server::start_in(
        &trusted,
        Opts {
            args: config_args(dir.path(), &yaml),
            ..Default::default()
        },
    );
    let ready = s.http.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let encrypted = psql(
        &trusted,
        "SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
         WHERE application_name = 'svc' AND datname = current_database()",
    );
    assert_eq!(
        encrypted.trim(),
        "t",
        "every connection of the server is TLS"
    );
    drop(s);

    let untrusted = dir.path().join("untrusted");
    std::fs::create_dir_all(&untrusted).unwrap();
    let s = Server::start_in(
        &untrusted,
        Opts {
            args: config_args(
                dir.path(),
                "storage: {backend: postgres, postgres: {tlsMode: require}}\n",
            ),
            ..Default::default()
        },
    );
    let ready = s.http.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body = ready.text().await.unwrap();
    assert!(body.contains("certificate"), "{body}");
}
