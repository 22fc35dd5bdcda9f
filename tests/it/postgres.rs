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

/// The addresses of the test hosts `Isolated` makes.
const ISOLATED_NET: &str = "10.231.0.0/16";

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
        // The test hosts of `Isolated` reach the cluster through their veth links.
        let mut hba = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("pg_hba.conf"))
            .unwrap();
        std::io::Write::write_all(
            &mut hba,
            format!("host all svc {ISOLATED_NET} trust\n").as_bytes(),
        )
        .unwrap();
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
                "-p {port} -k {} -c listen_addresses=0.0.0.0 -c max_connections=400 \
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

/// The database URL of the server on `data`, reached at `address` (the cluster listens on
/// every address of this host; `pg_hba.conf` admits loopback and `ISOLATED_NET`).
pub fn url_at(data: &Path, address: &str) -> String {
    url_for(data).replacen("@127.0.0.1:", &format!("@{address}:"), 1)
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

/// The partitions of the events table of the server on `data`, by name, in order.
pub fn event_partitions(data: &Path) -> Vec<String> {
    psql(
        data,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'events' ORDER BY c.relname",
    )
    .lines()
    .map(str::to_string)
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

/// An event of `tenant` at `ms` whose id carries that time, as the server's ids do.
#[cfg(feature = "postgres")]
fn event_at(n: u32, tenant: uuid::Uuid, ms: i64) -> svc::model::event::Event {
    use svc::model::event::{EventType, Severity};
    let ms_u = u64::try_from(ms).unwrap();
    let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        ms_u / 1000,
        u32::try_from(ms_u % 1000).unwrap() * 1_000_000,
    ));
    let objects = [uuid::Uuid::from_u128(0xa1), uuid::Uuid::from_u128(0xa2)];
    svc::model::event::Event {
        id,
        tenant_id: tenant,
        ts: svc::model::Timestamp::from_millis(ms).unwrap(),
        kind: EventType::ALL[(n as usize / 2) % 4],
        object_id: (!n.is_multiple_of(3)).then(|| objects[(n as usize / 2) % 2]),
        source_id: n.is_multiple_of(5).then(|| format!("source-{}", n % 3)),
        severity: Some([Severity::Critical, Severity::Warning, Severity::Info][n as usize % 3]),
        payload: serde_json::json!({"n": n}).into(),
        site: n.is_multiple_of(7).then(|| "edge-1".to_string()),
    }
}

/// Events on PostgreSQL live in a table partitioned by month (the month after the newest made
/// ahead) and answer every filter, page and direction exactly as the month files do; retention
/// drops whole partitions, a backup writes month files, and `svc migrate` carries a data
/// directory's month files into the partitions.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn events_live_in_month_partitions_and_answer_as_the_month_files_do() {
    use svc::model::event::{Event, EventFilter, EventType, Severity};
    use svc::store::events::{EventKey, EventStore, Position};
    use uuid::Uuid;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let on_pg = dir.path().join("pg");
    let on_files = dir.path().join("files");
    std::fs::create_dir_all(&on_pg).unwrap();
    // Opening the main store applies the schema, the events' table with it.
    super::support::open_store(&on_pg).close();
    let pg = EventStore::open_on(&on_pg, &super::support::backing(&on_pg)).unwrap();
    let files = EventStore::open(&on_files).unwrap();

    let tenants = [Uuid::from_u128(1), Uuid::from_u128(2)];
    let sept = "2026-09-30T23:59:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_millisecond();
    let events: Vec<Event> = (0..600u32)
        // Three months (the last minute of September, October, November), three events to a
        // millisecond, both tenants interleaved.
        .map(|n| {
            event_at(
                n,
                tenants[n as usize % 2],
                sept + i64::from(n / 3) * 25_920_000,
            )
        })
        .collect();
    for chunk in events.chunks(97) {
        let batch: Vec<_> = chunk.iter().cloned().map(std::sync::Arc::new).collect();
        pg.append(batch.clone()).await.unwrap().unwrap();
        files.append(batch).await.unwrap().unwrap();
    }
    assert_eq!(
        pg.months(),
        vec![202609, 202610, 202611, 202612],
        "a partition per month written, and the next one ahead"
    );
    assert_eq!(
        event_partitions(&on_pg),
        [
            "events_202609",
            "events_202610",
            "events_202611",
            "events_202612"
        ]
    );
    assert_eq!(psql(&on_pg, "SELECT count(*) FROM events").trim(), "600");
    // Stored twice is stored once.
    let again: Vec<_> = events[..10]
        .iter()
        .cloned()
        .map(std::sync::Arc::new)
        .collect();
    pg.append(again).await.unwrap().unwrap();
    assert_eq!(psql(&on_pg, "SELECT count(*) FROM events").trim(), "600");

    let mid = events[300].ts;
    let filters = |tenant: Uuid| {
        let base = EventFilter {
            tenant_id: tenant,
            ..Default::default()
        };
        vec![
            base.clone(),
            EventFilter {
                object_id: Some(Uuid::from_u128(0xa1)),
                ..base.clone()
            },
            EventFilter {
                source_id: Some("source-0".into()),
                ..base.clone()
            },
            EventFilter {
                types: vec![EventType::ALL[1]],
                ..base.clone()
            },
            EventFilter {
                types: vec![EventType::ALL[0], EventType::ALL[3]],
                ..base.clone()
            },
            EventFilter {
                severity: Some(Severity::Warning),
                ..base.clone()
            },
            EventFilter {
                site: Some("edge-1".into()),
                ..base.clone()
            },
            EventFilter {
                from: Some(mid),
                ..base.clone()
            },
            EventFilter {
                to: Some(mid),
                object_id: Some(Uuid::from_u128(0xa2)),
                ..base.clone()
            },
        ]
    };
    // The ids of the events `filter` matches, in time order: what every read must answer.
    let expected_ids = |filter: &EventFilter| -> Vec<Uuid> {
        let mut matched: Vec<&Event> = events.iter().filter(|e| filter.matches(e)).collect();
        matched.sort_by_key(|e| (e.ts.as_millis(), e.id));
        matched.iter().map(|e| e.id).collect()
    };
    for tenant in tenants {
        for filter in filters(tenant) {
            let expected = expected_ids(&filter);
            assert!(!expected.is_empty(), "{filter:?} matches some");
            for store in [&pg, &files] {
                // Oldest first, seven to a page, each page after the last one's position.
                let (mut ascending, mut after) = (Vec::new(), None);
                loop {
                    let page = store.oldest(&filter, after, 7).unwrap();
                    let Some(last) = page.last() else { break };
                    after = Position::of_id(last.id);
                    ascending.extend(page.iter().map(|e| e.id));
                }
                assert_eq!(ascending, expected, "oldest first: {filter:?}");
                let (mut descending, mut before) = (Vec::new(), None);
                loop {
                    let page = store.newest(&filter, before, 11).unwrap();
                    let Some(last) = page.last() else { break };
                    before = Position::of_id(last.id);
                    descending.extend(page.iter().map(|e| e.id));
                }
                descending.reverse();
                assert_eq!(descending, expected, "newest first: {filter:?}");
            }
        }
    }
    let some = &events[123];
    let absent = EventKey {
        tenant: tenants[0],
        ts: some.ts,
        id: Uuid::from_u128(0xdead),
    };
    assert_eq!(
        pg.stored(&[EventKey::of(some), absent]).unwrap(),
        [some.id].into(),
        "of the keys, the one stored"
    );
    let at = Position::of_id(events[250].id).unwrap();
    assert_eq!(
        pg.count_after(202610, at).unwrap(),
        files.count_after(202610, at).unwrap()
    );

    // A backup of PostgreSQL's events is month files that read back the same.
    let backup = dir.path().join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    let mut written = pg.snapshot(&backup).unwrap();
    written.sort();
    assert_eq!(
        written,
        [
            "events-202609.redb",
            "events-202610.redb",
            "events-202611.redb"
        ]
    );
    let restored = EventStore::open(&backup).unwrap();
    let all = EventFilter {
        tenant_id: tenants[1],
        ..Default::default()
    };
    assert_eq!(
        restored.oldest(&all, None, 1000).unwrap().len(),
        pg.oldest(&all, None, 1000).unwrap().len()
    );
    restored.close();

    // Retention drops whole partitions.
    assert_eq!(pg.remove_months_before(202610), vec![202609]);
    assert_eq!(pg.months(), vec![202610, 202611, 202612]);
    let left: usize = events
        .iter()
        .filter(|e| e.ts.as_millis() >= sept + 60_000)
        .count();
    assert_eq!(
        psql(&on_pg, "SELECT count(*) FROM events").trim(),
        left.to_string()
    );
    assert!(
        pg.oldest(&all, None, 1000)
            .unwrap()
            .iter()
            .all(|e| e.ts.as_millis() >= sept + 60_000)
    );
    pg.close();

    // `svc migrate` carries a data directory's month files into the partitions.
    let moved = dir.path().join("moved");
    std::fs::create_dir_all(&moved).unwrap();
    svc::store::Store::open_on(
        &moved,
        std::sync::Arc::new(svc::runtime::clock::SystemClock),
        svc::store::Backing::File,
    )
    .unwrap()
    .close();
    files.close();
    for name in std::fs::read_dir(&on_files).unwrap() {
        let name = name.unwrap().file_name();
        std::fs::copy(on_files.join(&name), moved.join(&name)).unwrap();
    }
    // The first use of the database migrates the data directory into it.
    super::support::open_store(&moved).close();
    let migrated = EventStore::open_on(&moved, &super::support::backing(&moved)).unwrap();
    for tenant in tenants {
        let f = EventFilter {
            tenant_id: tenant,
            ..Default::default()
        };
        let ids: Vec<Uuid> = migrated
            .oldest(&f, None, 1000)
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, expected_ids(&f));
    }
    migrated.close();
}

/// The metric tables answer as the metric file does: the same samples (new series, a unit
/// that changes, samples of one millisecond, batches that share buckets) give the same series,
/// raw points and aggregates; retention removes the same rows; a backup writes a metric file
/// that answers the same again.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn metric_series_live_in_tables_and_answer_as_the_metric_file_does() {
    use std::collections::HashSet;
    use svc::model::metric::{DAY_MS, Tier};
    use svc::store::metrics::{MetricsStore, Prune, Sample};
    use uuid::Uuid;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (on_pg, on_file) = (dir.path().join("pg"), dir.path().join("file"));
    std::fs::create_dir_all(&on_pg).unwrap();
    super::support::open_store(&on_pg).close();
    let pg = MetricsStore::open_on(&on_pg, &super::support::backing(&on_pg)).unwrap();
    let file = MetricsStore::open(&on_file).unwrap();

    let tenant = Uuid::from_u128(1);
    let objects = [
        Uuid::from_u128(0xa1),
        Uuid::from_u128(0xa2),
        Uuid::from_u128(0xa3),
    ];
    let start = 1_000 * DAY_MS;
    // Three days of a sample every 7 minutes per series; whole numbers, so sums are exact
    // whatever order they are added in.
    let samples: Vec<Sample> = (0..620i64)
        .flat_map(|n| {
            objects.iter().flat_map(move |o| {
                ["rta", "pl"].map(|metric| Sample {
                    tenant,
                    object: *o,
                    metric: metric.into(),
                    unit: if metric == "rta" && n >= 300 {
                        "s"
                    } else {
                        "ms"
                    }
                    .into(),
                    // Every tenth sample lands on the millisecond of the one before.
                    ms: start + (n - i64::from(n % 10 == 9)) * 420_000,
                    value: ((n * 7) % 23) as f64,
                })
            })
        })
        .collect();
    for batch in samples.chunks(101) {
        let (a, b) = (pg.record(batch.to_vec()), file.record(batch.to_vec()));
        a.await.unwrap();
        b.await.unwrap();
    }
    let answers = |store: &MetricsStore| {
        let mut out = Vec::new();
        for o in objects {
            let series = store.series_of(tenant, o).unwrap();
            out.push(format!(
                "{:?}",
                series
                    .iter()
                    .map(|s| (&s.metric, &s.unit, s.first_ms, s.last_ms, s.last))
                    .collect::<Vec<_>>()
            ));
            for metric in ["rta", "pl", "none"] {
                for tier in Tier::ALL {
                    for (from, to) in [(0, i64::MAX), (start + DAY_MS + 1, start + 2 * DAY_MS)] {
                        let points = store.points(tenant, o, metric, tier, from, to).unwrap();
                        out.push(format!(
                            "{o} {metric} {tier:?} {from}: {:?}",
                            points.map(|(info, p)| (info.last, info.unit, p))
                        ));
                    }
                }
            }
        }
        out
    };
    // Answer by answer, so a failure shows the one that differs.
    let same = |got: Vec<String>, expected: &[String]| {
        assert_eq!(got.len(), expected.len());
        for (got, expected) in got.iter().zip(expected) {
            assert_eq!(got, expected);
        }
    };
    let expected = answers(&file);
    same(answers(&pg), &expected);
    assert!(
        expected.iter().any(|a| a.contains("\"s\"")),
        "the unit changed"
    );
    assert_eq!(pg.stats().series, 6);
    assert_eq!(
        psql(&on_pg, "SELECT count(*) FROM metric_raw").trim(),
        (6 * 620 - 6 * 62).to_string(),
        "one row per series and millisecond"
    );

    // A backup's metric file answers the same.
    let backup = dir.path().join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    assert_eq!(
        pg.snapshot(&backup).unwrap().as_deref(),
        Some("metrics.redb")
    );
    let restored = MetricsStore::open(&backup).unwrap();
    same(answers(&restored), &expected);
    restored.close();

    // Retention: raw samples older than 30 days, and the series of an object that is gone.
    let prune = || Prune {
        now_ms: start + 32 * DAY_MS,
        live: Some(HashSet::from([(tenant, objects[0]), (tenant, objects[1])])),
    };
    let (a, b) = (pg.prune(prune()), file.prune(prune()));
    let removed = a.await.unwrap().unwrap();
    assert_eq!(removed, b.await.unwrap().unwrap());
    assert!(removed > 0);
    let expected = answers(&file);
    assert!(expected[0].contains("rta") && expected.iter().any(|a| a.ends_with("None")));
    same(answers(&pg), &expected);
    assert_eq!(pg.stats().series, 4);
    pg.close();
    file.close();
}

/// A write's row changes go out without waiting for their answers; one the database refuses
/// fails that write alone (its savepoint rolls back) while the writes grouped with it commit,
/// and the next writes go on.
#[tokio::test]
async fn a_row_the_database_refuses_fails_its_write_alone() {
    use super::support::{Admin, assert_chain_intact, call, host_names};
    use reqwest::Method;
    use serde_json::json;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    psql(
        &s.data,
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF position('poison'::bytea in NEW.k) > 0 THEN RAISE EXCEPTION 'poisoned row'; END IF; \
         RETURN NEW; END $$; \
         CREATE TRIGGER refuse_poison BEFORE INSERT ON \"kv_object_id_by_name\" \
         FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    );
    let create = |name: String| {
        call(s, token, Method::POST, "/api/v1/hosts")
            .json(&json!({"name": name, "spec": {}}))
            .send()
    };
    // Many at once, so the poisoned write shares its group with others.
    let names: Vec<String> = (0..40)
        .map(|i| {
            if i % 10 == 5 {
                format!("poison-{i}")
            } else {
                format!("fine-{i}")
            }
        })
        .collect();
    let answers = futures_util::future::join_all(names.iter().cloned().map(create)).await;
    for (name, res) in names.iter().zip(answers) {
        let res = res.unwrap();
        let status = res.status();
        let body = res.text().await.unwrap();
        if name.starts_with("poison") {
            assert_eq!(status, 500, "{name}: {body}");
            assert!(
                !body.contains("poisoned row"),
                "internal errors stay in the log: {body}"
            );
        } else {
            assert_eq!(status, 201, "{name}: {body}");
        }
    }
    let stored = host_names(s, token).await;
    for name in &names {
        assert_eq!(
            stored.contains(name),
            name.starts_with("fine"),
            "{name}: {stored:?}"
        );
    }
    assert_eq!(create("fine-after".into()).await.unwrap().status(), 201);
    assert_chain_intact(s, token).await;
    let log = std::fs::read_to_string(s.data.with_extension("log")).unwrap();
    assert!(
        log.contains("poisoned row"),
        "the database's reason is logged"
    );
}

/// Reads an SSE stream into `seen` until it holds every one of `wanted` (10 s at most).
async fn read_stream_until(stream: &mut reqwest::Response, seen: &mut String, wanted: &[&str]) {
    let started = std::time::Instant::now();
    while !wanted.iter().all(|w| seen.contains(w)) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the SSE client saw only: {seen}"
        );
        let chunk = stream.chunk();
        if let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(std::time::Duration::from_millis(500), chunk).await
        {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

async fn open_alerts(s: &super::support::Server, token: &str) -> Vec<serde_json::Value> {
    super::support::get(s, token, "/api/v1/alerts?status=open").await["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Two servers on one database, as in `two_processes`.
struct Pair {
    /// Where their data directories are; gone with the pair.
    dir: tempfile::TempDir,
    /// The administrator's token.
    token: String,
    /// The server that leads.
    a: super::support::Server,
    /// The server beside it.
    b: super::support::Server,
    a_data: PathBuf,
    b_data: PathBuf,
}

/// Starts A, which leads, and then B beside it: a data directory of its own with A's database
/// and A's secrets key. `None`, saying SKIPPED, unless the run keeps its stores in PostgreSQL.
async fn two_processes() -> Option<Pair> {
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return None;
    }
    Some(
        two_processes_with(
            |_| super::support::Opts::default(),
            super::support::Opts::default(),
        )
        .await,
    )
}

/// `two_processes`, A started with the options `a_opts` makes of its data directory, B with
/// `b_opts`.
async fn two_processes_with(
    a_opts: impl FnOnce(&Path) -> super::support::Opts,
    b_opts: super::support::Opts,
) -> Pair {
    use super::support::{Server, bootstrap, leads};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (a_data, b_data) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_data).unwrap();
    let token = bootstrap(&a_data);
    let a = Server::start_in(&a_data, a_opts(&a_data));
    std::fs::create_dir_all(&b_data).unwrap();
    std::fs::copy(a_data.with_extension("pgdb"), b_data.with_extension("pgdb")).unwrap();
    std::fs::copy(a_data.join("master.key"), b_data.join("master.key")).unwrap();
    let b = Server::start_in(&b_data, b_opts);
    let started = Instant::now();
    while !b.log().contains("another process leads") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "B never served beside A"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        leads(&a, &token).await && !leads(&b, &token).await,
        "A leads, B does not"
    );
    Pair {
        dir,
        token,
        a,
        b,
        a_data,
        b_data,
    }
}

/// Two processes on one database both serve: a write through either is read through the
/// other (an object, a rule the leading process's alert engine then applies to a result posted
/// to the other, the metric history); a token deleted through one stops working on the other,
/// which had it cached; an SSE client of one sees what is committed through the other, and the
/// events a federation site forwarded to the other; a discovery scan started through one is
/// answered for through the other. Killing the leading process moves the lead
/// (the alert engine) to the other with everything acknowledged. The killed one, started again, serves beside it; a
/// leading process cut off from the database while the other took the lead does not write
/// again: it answers 503 and exits 75.
#[tokio::test]
async fn two_processes_serve_one_database_and_the_lead_moves_when_one_dies() {
    use super::support::{Opts, Server, assert_chain_intact, call, get, host_names, leads};
    use reqwest::Method;
    use serde_json::{Value, json};
    use std::time::{Duration, Instant};
    let Some(Pair {
        dir: _dir,
        token,
        a,
        b,
        a_data,
        b_data,
    }) = two_processes().await
    else {
        return;
    };
    let until = |what: &str, limit: Duration, started: Instant| {
        assert!(started.elapsed() < limit, "{what} never happened");
    };

    let create = |s: &Server, name: String| {
        call(s, &token, Method::POST, "/api/v1/hosts")
            .json(&json!({"name": name, "spec": {"address": "192.0.2.7"}}))
            .send()
    };
    let mut acked = Vec::new();
    for i in 0..10 {
        let (s, name) = if i % 2 == 0 {
            (&a, format!("on-a-{i}"))
        } else {
            (&b, format!("on-b-{i}"))
        };
        assert_eq!(create(s, name.clone()).await.unwrap().status(), 201);
        acked.push(name);
    }
    for s in [&a, &b] {
        let names = host_names(s, &token).await;
        assert!(acked.iter().all(|n| names.contains(n)), "{names:?}");
    }
    // A rule and a service made through B; a critical result posted to B opens an alert by
    // A's engine (the lead), readable through B.
    for (path, body) in [
        (
            "/api/v1/services",
            json!({"name": "pump", "host": "on-a-0", "spec": {}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "pump-critical", "match": "event.type == 'state_change' && event.state == 'CRITICAL'", "severity": "critical"}),
        ),
    ] {
        let res = call(&b, &token, Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{path}");
    }
    let pump = get(&a, &token, "/api/v1/services?name=pump").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let level = |s: &Server, state: u8, value: f64| {
        call(s, &token, Method::POST, "/api/v1/results")
            .json(&json!({"results": [{"host": "on-a-0", "service": "pump", "state": state, "output": format!("level | level={value}m")}]}))
            .send()
    };
    assert_eq!(level(&b, 2, 1.0).await.unwrap().status(), 202);
    let started = Instant::now();
    while open_alerts(&b, &token).await.is_empty() {
        until("an alert from B's result", Duration::from_secs(20), started);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(level(&a, 0, 2.0).await.unwrap().status(), 202);

    // A token used through B (so B caches it), then deleted through A.
    let minted = call(&a, &token, Method::POST, "/api/v1/api-tokens")
        .json(&json!({"name": "short-lived", "scopes": ["objects:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(minted.status(), 201);
    let minted: Value = minted.json().await.unwrap();
    let (secret, id) = (
        minted["token"].as_str().unwrap().to_string(),
        minted["meta"]["id"].as_str().unwrap().to_string(),
    );
    let whoami = |s: &Server| call(s, &secret, Method::GET, "/api/v1/whoami").send();
    assert_eq!(whoami(&b).await.unwrap().status(), 200);
    assert_eq!(whoami(&b).await.unwrap().status(), 200, "cached");
    let deleted = call(
        &a,
        &token,
        Method::DELETE,
        &format!("/api/v1/api-tokens/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(deleted.status(), 204);
    let started = Instant::now();
    while whoami(&b).await.unwrap().status() != 401 {
        until(
            "B refusing the deleted token",
            Duration::from_secs(5),
            started,
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // An SSE client of B sees what is committed through A (and through B), in commit order.
    let mut stream = call(&b, &token, Method::GET, "/api/v1/stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut made = Vec::new();
    for (s, name) in [(&a, "seen-on-b"), (&b, "made-on-b")] {
        let res = create(s, name.into()).await.unwrap();
        assert_eq!(res.status(), 201);
        let host: Value = res.json().await.unwrap();
        made.push(format!("host/{}", host["id"].as_str().unwrap()));
    }
    let mut seen = String::new();
    let made_refs: Vec<&str> = made.iter().map(String::as_str).collect();
    read_stream_until(&mut stream, &mut seen, &made_refs).await;
    assert!(
        seen.find(&made[0]) < seen.find(&made[1]),
        "in commit order: {seen}"
    );
    // Events a site forwards to A (stored with the site's ids, not journaled) reach B's SSE
    // client too, and A's once: A publishes what it stored, its relay only the others'.
    let mut a_stream = call(&a, &token, Method::GET, "/api/v1/stream")
        .send()
        .await
        .unwrap();
    assert_eq!(a_stream.status(), 200);
    let res = call(&a, &token, Method::POST, "/api/v1/sites")
        .json(&json!({"name": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let (north, _) = super::support::mint(
        &a,
        &token,
        json!({"name": "north-edge", "scopes": ["sites:connect"], "site": "north"}),
    )
    .await;
    let hour_ago = (jiff::Timestamp::now().as_millisecond() - 3_600_000) as u64;
    let forwarded: Vec<Value> = (0..3)
        .map(|n| super::federation::forwarded_event(hour_ago + n, n))
        .collect();
    let res = call(&a, &north, Method::POST, "/api/v1/sites/north:events")
        .json(&json!({"events": forwarded}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let sent: Vec<&str> = forwarded
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    read_stream_until(&mut stream, &mut seen, &sent).await;
    let ids: Vec<usize> = sent.iter().map(|id| seen.find(id).unwrap()).collect();
    assert!(ids.is_sorted(), "in the site's order: {seen}");
    drop(stream);
    // A's relay publishes the host made after the forward in a step that first took the
    // forwarded events' announcement, which B's relay had already published.
    let res = create(&a, "after-the-forward".into()).await.unwrap();
    assert_eq!(res.status(), 201);
    let after: Value = res.json().await.unwrap();
    let after = format!("host/{}", after["id"].as_str().unwrap());
    let mut a_seen = String::new();
    let wanted: Vec<&str> = sent.iter().copied().chain([after.as_str()]).collect();
    read_stream_until(&mut a_stream, &mut a_seen, &wanted).await;
    for id in &sent {
        assert_eq!(
            a_seen.matches(&format!("id: {id}\n")).count(),
            1,
            "{id} once on A's stream: {a_seen}"
        );
    }
    drop(a_stream);

    // A discovery scan started through A is answered for through B.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let res = call(&a, &token, Method::POST, "/api/v1/discovery/scans")
        .json(&json!({"cidr": "127.0.0.1/32", "ports": [port]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let scan: Value = res.json().await.unwrap();
    let path = format!("/api/v1/discovery/scans/{}", scan["id"].as_str().unwrap());
    let started = Instant::now();
    while get(&b, &token, &path).await["status"] != "done" {
        until(
            "the scan done, seen through B",
            Duration::from_secs(10),
            started,
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        get(&b, &token, &path).await["found"][0]["openPorts"],
        json!([port])
    );
    assert_eq!(
        get(&b, &token, "/api/v1/discovery/scans").await["items"][0]["id"],
        scan["id"]
    );

    let levels = |s: &Server| {
        let query = call(s, &token, Method::POST, "/api/v1/metrics/query").json(&json!({
            "objectId": pump, "metric": "level",
            "from": jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1),
            "to": jiff::Timestamp::now() + jiff::SignedDuration::from_mins(1),
        }));
        async move {
            let body: serde_json::Value = query.send().await.unwrap().json().await.unwrap();
            body["points"]
                .as_array()
                .unwrap_or_else(|| panic!("{body}"))
                .iter()
                .map(|p| p["v"].as_f64().unwrap())
                .collect::<Vec<f64>>()
        }
    };
    assert_eq!(levels(&b).await, [1.0, 2.0], "samples through both");

    // The lead dies: B leads, with every acknowledged write, and its engine resolves the
    // alert A's engine opened.
    let killed = Instant::now();
    a.crash();
    while !leads(&b, &token).await {
        until("B taking the lead", Duration::from_secs(30), killed);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("B led {:?} after the kill", killed.elapsed());
    let names = host_names(&b, &token).await;
    for name in &acked {
        assert!(names.contains(name), "{name} lost in the takeover");
    }
    assert_chain_intact(&b, &token).await;
    assert_eq!(level(&b, 2, 3.0).await.unwrap().status(), 202);
    assert_eq!(level(&b, 0, 4.0).await.unwrap().status(), 202);
    assert_eq!(levels(&b).await, [1.0, 2.0, 3.0, 4.0]);
    let started = Instant::now();
    while !open_alerts(&b, &token).await.is_empty() {
        until(
            "B's engine resolving the alert",
            Duration::from_secs(20),
            started,
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lease = psql(&b_data, "SELECT holder FROM svc_lease");
    assert!(lease.contains(&format!("pid {}", b.pid())), "{lease}");

    // A again, beside B; then B's lease session is cut: A leads, and B steps down.
    let a = Server::start_in(&a_data, Opts::default());
    assert_eq!(create(&a, "on-a-again".into()).await.unwrap().status(), 201);
    let a_log = || std::fs::read_to_string(a_data.with_extension("log")).unwrap();
    let started = Instant::now();
    while !a_log().contains("another process leads") {
        until("A waiting for the lead", Duration::from_secs(10), started);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    psql(
        &b_data,
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
         WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted \
         AND l.classid = 21334 AND l.objid = 1124073474",
    );
    let cut = Instant::now();
    while !leads(&a, &token).await {
        until("A taking the lead", Duration::from_secs(30), cut);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // B notices the lost lease on its own and may have exited already.
    if let Ok(refused) = create(&b, "on-b-after-the-cut".into()).await {
        assert_eq!(refused.status(), 503, "a lead cut off must not write");
    }
    let status = b.exits_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(75), "it steps down: {status:?}");
    let names = host_names(&a, &token).await;
    assert!(
        names.iter().any(|n| n == "on-a-again") && !names.iter().any(|n| n == "on-b-after-the-cut"),
        "{names:?}"
    );
}

/// Stops a process (SIGSTOP) between two of its writes: a process stopped inside one would
/// keep the writers' lock and stall every other.
fn stop_between_writes(data: &Path, pid: i32) {
    use super::support::signal;
    let writing = "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
         WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted \
         AND l.classid = 21334 AND l.objid = 1124073473";
    for _ in 0..50 {
        signal(pid, "STOP");
        if psql(data, writing).trim() == "0" {
            return;
        }
        signal(pid, "CONT");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the process never stopped between writes");
}

/// A host whose alerts fall in a partition `a` leads (beside `b`), so that `a` fires their
/// escalation steps while `b` is stopped.
async fn led_object(
    a: &super::support::Server,
    b: &super::support::Server,
    token: &str,
) -> uuid::Uuid {
    use serde_json::json;
    let a_held = partitions_shared(&[a, b], token).await.remove(0);
    let tenant: uuid::Uuid = super::support::default_tenant(a, token)
        .await
        .parse()
        .unwrap();
    for n in 0..64 {
        let res = super::support::call(a, token, reqwest::Method::POST, "/api/v1/hosts")
            .json(&json!({"name": format!("pump-{n}"), "spec": {}}))
            .send()
            .await
            .unwrap();
        let host = super::support::json(res, 201).await;
        let object: uuid::Uuid = host["id"].as_str().unwrap().parse().unwrap();
        let partition = svc::store::partition_of(svc::store::PARTITIONS, tenant, Some(object));
        if a_held.contains(&u64::from(partition)) {
            return object;
        }
    }
    panic!("no host of 64 fell in A's partitions {a_held:?}");
}

/// Raises an alert on `object` under the escalation policy `page`.
async fn raise_on(s: &super::support::Server, token: &str, title: &str, object: uuid::Uuid) {
    use serde_json::json;
    let res = super::support::call(s, token, reqwest::Method::POST, "/api/v1/alerts")
        .json(&json!({"title": title, "escalationPolicy": "page", "objectId": object}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

/// The escalation policy `page`: step 0 pages the contact `ada` on the webhook channel `hook`
/// at `url` (a failure retried 2 s later, five attempts).
async fn paging(s: &super::support::Server, token: &str, url: &str) {
    use serde_json::json;
    super::support::create_all(
        s,
        token,
        vec![
            (
                "/api/v1/channels",
                json!({"name": "hook", "type": "webhook", "enabled": true, "config": {
                    "url": url, "retryBackoffSeconds": "2", "retryMaxAttempts": "5"}}),
            ),
            (
                "/api/v1/contacts",
                json!({"name": "ada", "preferences": [{"channels": ["hook"], "profile": "default"}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
            ),
        ],
    )
    .await;
}

/// Every process's courier sends, each claiming the deliveries it takes. A page's first attempt
/// fails; with the leading process stopped (it keeps the lead but does nothing), the other
/// sends the retry; started again, the leader sends nothing twice.
#[tokio::test]
async fn a_process_beside_the_leader_sends_what_is_due() {
    use super::notify::{notifications, raise};
    use super::receiver::Receiver;
    use super::support::signal;
    use std::time::Duration;
    let Some(Pair {
        dir: _dir,
        token,
        a,
        b,
        ..
    }) = two_processes().await
    else {
        return;
    };
    let hooks = Receiver::start().await;
    hooks.queue("/page", &[503]);
    paging(&b, &token, &hooks.url("/page")).await;
    raise(&b, &token, "Pump 3 ran dry", "page").await;
    hooks.wait_for("/page", 1, Duration::from_secs(20)).await;
    let hook = |c: &str| c == "hook";
    let first = notifications(&b, &token, 2, hook).await;
    assert_eq!(first, ["hook:pending", "hook:failed"], "the first attempt");

    stop_between_writes(&a.data, a.pid());
    let got = hooks.wait_for("/page", 2, Duration::from_secs(20)).await;
    assert_eq!(got[1].status, 200, "the retry, sent by B");
    let all = notifications(&b, &token, 3, hook).await;
    assert_eq!(all, ["hook:pending", "hook:failed", "hook:sent"]);
    signal(a.pid(), "CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(hooks.received("/page").len(), 2, "nothing sent twice");
    assert!(b.log().contains("another process leads") && !b.log().contains("leading:"));
}

/// Kill -9 of either process, round after round (the leader, then the one beside it, each
/// started again), while both take writes and raise paged alerts: no acknowledged write is
/// lost, and every acknowledged alert is paged, whichever process held its escalation or its
/// delivery's claim when it died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_either_process_loses_no_acknowledged_write_and_no_page() {
    use super::durability::{Round, crash_under_load, spawn_creator};
    use super::receiver::Receiver;
    use super::support::{Opts, Server, assert_chain_intact, config_args, host_names};
    use serde_json::json;
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    // Every alert pages on its own: this many opening at once would otherwise flood.
    let config = tempfile::tempdir().unwrap();
    let opts = || Opts {
        args: config_args(
            config.path(),
            "alerting:\n  flood: {enterAt: {alerts: 0, within: 10m}}\n",
        ),
        ..Opts::default()
    };
    let Pair {
        dir: _dir,
        token,
        a,
        b,
        a_data,
        b_data,
    } = two_processes_with(|_| opts(), opts()).await;
    let hooks = Receiver::start().await;
    paging(&b, &token, &hooks.url("/page")).await;
    let data = [a_data, b_data];
    let mut servers = [Some(a), Some(b)];
    let (mut hosts, mut alerts) = (Vec::new(), Vec::new());
    // A leads, then B: A (leading), A (beside B), B (leading), B (beside A).
    for (round, victim) in [0, 0, 1, 1].into_iter().enumerate() {
        let writes = Arc::new(Round::default());
        let mut host_writers = Vec::new();
        let mut alert_writers = Vec::new();
        for (i, s) in servers.iter().flatten().enumerate() {
            host_writers.push(spawn_creator(
                &s.base,
                &token,
                writes.clone(),
                "/api/v1/hosts",
                move |n| format!("r{round}-s{i}-h{n}"),
                |name| json!({"name": name, "spec": {}}),
            ));
            alert_writers.push(spawn_creator(
                &s.base,
                &token,
                writes.clone(),
                "/api/v1/alerts",
                move |n| format!("r{round}-s{i}-a{n}"),
                |title| json!({"title": title, "escalationPolicy": "page", "labels": {"n": title}}),
            ));
        }
        let victim_server = servers[victim].take().unwrap();
        crash_under_load(victim_server, &writes, 12, Duration::from_millis(300)).await;
        for w in host_writers {
            hosts.extend(w.await.unwrap());
        }
        for w in alert_writers {
            alerts.extend(w.await.unwrap());
        }
        servers[victim] = Some(Server::start_in(&data[victim], opts()));
    }
    assert!(
        !hosts.is_empty() && !alerts.is_empty(),
        "the writers got {} hosts and {} alerts through",
        hosts.len(),
        alerts.len()
    );
    for s in servers.iter().flatten() {
        let present = host_names(s, &token).await;
        let lost: Vec<_> = hosts.iter().filter(|h| !present.contains(h)).collect();
        assert!(lost.is_empty(), "lost: {lost:?}");
    }
    let started = Instant::now();
    loop {
        let paged: BTreeSet<String> = hooks
            .received("/page")
            .iter()
            .map(|r| r.json()["alert"]["title"].as_str().unwrap().to_string())
            .collect();
        let unpaged: Vec<_> = alerts.iter().filter(|t| !paged.contains(*t)).collect();
        if unpaged.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {} acknowledged alerts never paged: {unpaged:?}",
            unpaged.len(),
            alerts.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "{} hosts, {} alerts acknowledged; {} pages; all paged {:?} after the last start",
        hosts.len(),
        alerts.len(),
        hooks.received("/page").len(),
        started.elapsed()
    );
    assert_chain_intact(servers[0].as_ref().unwrap(), &token).await;
}

/// An address has one sign-in throttle and one failed-token throttle across the processes:
/// eight sign-ins through either, and the ninth waits whichever it goes through; twenty failed
/// token verifications through both, and the next is refused on each.
#[tokio::test]
async fn the_throttles_hold_across_processes() {
    use super::hardening::forged;
    use super::support::{assert_problem, call, login, mint};
    use reqwest::Method;
    use serde_json::json;
    let Some(Pair {
        dir: _dir,
        token,
        a,
        b,
        ..
    }) = two_processes().await
    else {
        return;
    };
    for s in [&a, &b].repeat(4) {
        let res = login(s, "nobody@example.com", "wrong wrong wrong", false).await;
        assert_eq!(res.status(), 401);
    }
    for s in [&b, &a] {
        let res = login(s, "nobody@example.com", "wrong wrong wrong", false).await;
        assert_eq!(res.status(), 429, "the ninth attempt waits on either");
        assert_eq!(res.headers()["retry-after"], "30");
    }

    let (real, _) = mint(
        &a,
        &token,
        json!({"name": "ops", "scopes": ["objects:read"]}),
    )
    .await;
    for (i, s) in [&a, &b].repeat(10).into_iter().enumerate() {
        let res = call(s, &forged(&real, i), Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap();
        assert_problem(res, 401, "svc:auth/invalid").await;
    }
    for s in [&a, &b] {
        let res = call(s, &forged(&real, 99), Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap();
        assert_problem(res, 429, "svc:auth/throttled").await;
    }
}

/// A claim lapses with its process: the leader, killed (-9) while its courier waits on a send,
/// leaves the delivery to the other process, which sends it within seconds of the kill, not
/// after the claim's three minutes.
#[tokio::test]
async fn a_delivery_claimed_by_a_killed_process_goes_out_from_the_other() {
    use super::receiver::Receiver;
    use super::support::signal;
    use std::time::{Duration, Instant};
    let Some(Pair {
        dir: _dir,
        token,
        a,
        b,
        b_data,
        ..
    }) = two_processes().await
    else {
        return;
    };
    let hooks = Receiver::start().await;
    hooks.hold("/page", 1);
    paging(&a, &token, &hooks.url("/page")).await;
    // Only A sends the first attempt, and it hangs there.
    let object = led_object(&a, &b, &token).await;
    stop_between_writes(&b_data, b.pid());
    raise_on(&a, &token, "Pump 4 ran dry", object).await;
    hooks.wait_for("/page", 1, Duration::from_secs(20)).await;
    let killed = Instant::now();
    a.crash();
    signal(b.pid(), "CONT");
    let got = hooks.wait_for("/page", 2, Duration::from_secs(30)).await;
    eprintln!("B sent the page {:?} after A died", killed.elapsed());
    assert_eq!(got[1].status, 200);
    assert_eq!(got[1].json()["alert"]["title"], "Pump 4 ran dry");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        hooks.received("/page").len(),
        2,
        "sent once more, not again"
    );
}

/// A second host on this machine: a network namespace joined to this one by a veth pair, whose
/// link can be cut without a word to either side (no FIN, no RST), as a power cut or a pulled
/// cable does. Removed when dropped.
struct Isolated {
    name: String,
    /// This host's end of the link.
    outside: String,
    /// The namespace's end.
    inside: String,
    /// This host's address on the link (where the cluster and a receiver are reached).
    host_address: String,
    /// The namespace's address.
    address: String,
}

impl Isolated {
    /// `None` where no namespace can be made (not root, no iproute2): a skip, or in CI a
    /// failure.
    fn new() -> Option<Isolated> {
        let id = std::process::id();
        let net = id % 256;
        let isolated = Isolated {
            name: format!("svc-it-{id}"),
            outside: format!("sv{id}h"),
            inside: format!("sv{id}n"),
            host_address: format!("10.231.{net}.1"),
            address: format!("10.231.{net}.2"),
        };
        let (name, outside, inside) = (&isolated.name, &isolated.outside, &isolated.inside);
        let host_net = format!("{}/30", isolated.host_address);
        let own_net = format!("{}/30", isolated.address);
        let steps: [&[&str]; 8] = [
            &["netns", "add", name],
            &[
                "link", "add", outside, "type", "veth", "peer", "name", inside,
            ],
            &["link", "set", inside, "netns", name],
            &["addr", "add", &host_net, "dev", outside],
            &["link", "set", outside, "up"],
            &["-n", name, "addr", "add", &own_net, "dev", inside],
            &["-n", name, "link", "set", inside, "up"],
            &["-n", name, "link", "set", "lo", "up"],
        ];
        for step in steps {
            if !ip(step) {
                super::support::peer_missing("a network namespace (root and iproute2's ip)");
                return None;
            }
        }
        Some(isolated)
    }

    /// Options that start a server on this host, listening on its address, its database
    /// reached over the link.
    fn server_opts(&self, data: &Path) -> super::support::Opts {
        super::support::Opts {
            wrapper: ["ip", "netns", "exec", &self.name]
                .map(String::from)
                .to_vec(),
            listen: Some(format!("{}:0", self.address)),
            env: vec![(
                "SERVICE_STORAGE_POSTGRES_URL".into(),
                url_at(data, &self.host_address),
            )],
            ..Default::default()
        }
    }

    /// Cuts (false) or mends (true) the link.
    fn link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        assert!(ip(&["-n", &self.name, "link", "set", &self.inside, state]));
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.name]);
        ip(&["link", "del", &self.outside]);
    }
}

/// Runs iproute2's `ip` with `args`; whether it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The leader's host goes silent (its link cut: no FIN, no RST) while its courier waits on a
/// page's send. The database's keepalives drop its sessions within about half a minute: the
/// other process leads with every acknowledged write, and sends the page whose claim lapsed
/// with them. Heard again, the old leader finds the lead taken and steps down (exit 75)
/// without sending or writing anything.
#[tokio::test]
async fn a_leader_whose_host_goes_silent_loses_the_lead_and_its_claims() {
    use super::receiver::Receiver;
    use super::support::{call, host_names, leads, signal};
    use reqwest::Method;
    use serde_json::json;
    use std::time::{Duration, Instant};
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let Some(net) = Isolated::new() else { return };
    let Pair {
        dir: _dir,
        token,
        a,
        b,
        b_data,
        ..
    } = two_processes_with(
        |data| net.server_opts(data),
        super::support::Opts::default(),
    )
    .await;
    let mut acked = Vec::new();
    for i in 0..5 {
        let name = format!("before-the-cut-{i}");
        let res = call(&a, &token, Method::POST, "/api/v1/hosts")
            .json(&json!({"name": name, "spec": {"address": "192.0.2.7"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        acked.push(name);
    }
    let hooks = Receiver::start_on(&net.host_address).await;
    hooks.hold("/page", 1);
    paging(&a, &token, &hooks.url("/page")).await;
    // Only A sends the first attempt, and it hangs there.
    let object = led_object(&a, &b, &token).await;
    stop_between_writes(&b_data, b.pid());
    raise_on(&a, &token, "Pump 5 ran dry", object).await;
    hooks.wait_for("/page", 1, Duration::from_secs(20)).await;

    net.link(false);
    let cut = Instant::now();
    signal(b.pid(), "CONT");
    while !leads(&b, &token).await {
        assert!(
            cut.elapsed() < Duration::from_secs(60),
            "B never took the lead from the silent A"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("B led {:?} after A's link was cut", cut.elapsed());
    let names = host_names(&b, &token).await;
    for name in &acked {
        assert!(names.contains(name), "{name} lost in the takeover");
    }
    let got = hooks.wait_for("/page", 2, Duration::from_secs(30)).await;
    eprintln!("B sent the page {:?} after the cut", cut.elapsed());
    assert_eq!(got[1].status, 200);
    assert_eq!(got[1].json()["alert"]["title"], "Pump 5 ran dry");
    let res = call(&b, &token, Method::POST, "/api/v1/hosts")
        .json(&json!({"name": "after-the-cut", "spec": {"address": "192.0.2.7"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    net.link(true);
    let status = a.exits_within(Duration::from_secs(90));
    assert_eq!(status.code(), Some(75), "A steps down: {status:?}");
    assert_eq!(hooks.received("/page").len(), 2, "A sent nothing more");
    assert!(leads(&b, &token).await);
}

/// A channel one process found down is down for the other: A's attempt on `down` fails and
/// passes the page to `spare` at once; B, sending the next page while A's courier waits on
/// `spare`, skips `down` without an attempt of its own and pages through `spare`.
#[tokio::test]
async fn a_channel_one_process_found_down_is_down_for_the_other() {
    use super::notify::raise;
    use super::receiver::Receiver;
    use super::support::{create_all, signal};
    use serde_json::json;
    use std::time::Duration;
    let Some(Pair {
        dir: _dir,
        token,
        a,
        b,
        b_data,
        ..
    }) = two_processes().await
    else {
        return;
    };
    let hooks = Receiver::start().await;
    hooks.answer("/down", 503);
    hooks.hold("/spare", 1);
    let hook = |name: &str, path: &str| json!({"name": name, "type": "webhook", "enabled": true, "config": {"url": hooks.url(path)}});
    create_all(
        &a,
        &token,
        vec![
            ("/api/v1/channels", hook("down", "/down")),
            ("/api/v1/channels", hook("spare", "/spare")),
            (
                "/api/v1/contacts",
                json!({"name": "ada", "preferences": [
                    {"channels": ["down"], "profile": "default"},
                    {"channels": ["spare"], "profile": "default"}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
            ),
        ],
    )
    .await;
    // A alone sends the first page: `down` fails, and `spare` hangs, holding A's courier.
    let object = led_object(&a, &b, &token).await;
    stop_between_writes(&b_data, b.pid());
    raise_on(&a, &token, "Pump 6 ran dry", object).await;
    hooks.wait_for("/down", 1, Duration::from_secs(20)).await;
    hooks.wait_for("/spare", 1, Duration::from_secs(20)).await;
    signal(b.pid(), "CONT");
    raise(&a, &token, "Pump 7 ran dry", "page").await;
    let got = hooks.wait_for("/spare", 2, Duration::from_secs(30)).await;
    assert_eq!(got[1].status, 200);
    assert_eq!(got[1].json()["alert"]["title"], "Pump 7 ran dry");
    assert_eq!(
        hooks.received("/down").len(),
        1,
        "B did not try the channel A found down"
    );
}

/// The alert engine's partitions each process decides (`enginePartitions` of
/// `/api/v1/system/info`), once every partition is led by exactly one of `servers`, each
/// holding its even share; fails after 30 s.
async fn partitions_shared(servers: &[&super::support::Server], token: &str) -> Vec<Vec<u64>> {
    use std::time::{Duration, Instant};
    let started = Instant::now();
    let share = 16usize.div_ceil(servers.len());
    loop {
        let mut held = Vec::new();
        for s in servers {
            let info = super::support::get(s, token, "/api/v1/system/info").await;
            held.push(
                info["enginePartitions"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|p| p.as_u64()).collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
        }
        let mut all: Vec<u64> = held.iter().flatten().copied().collect();
        all.sort_unstable();
        if all == (0..16).collect::<Vec<u64>>() && held.iter().all(|h| h.len() <= share) {
            return held;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the partitions were never shared out: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The alert engine spreads over the processes: two share its sixteen partitions, a third
/// that joins takes its share from them, and a process killed (kill -9, mid-batch, each of the
/// three in turn, started again) hands its partitions to the others. Throughout, with results
/// flipping twelve services through the process left alive, every CRITICAL episode of each
/// service has exactly one alert, opened and resolved once and in order: no decision is lost
/// or made twice across a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_engine_spreads_over_three_processes_and_a_killed_ones_partitions_move() {
    use super::durability::{
        Round, alerts_follow_states, crash_under_load, flipped_services, service_states,
        spawn_flippers,
    };
    use super::support::{Opts, Server, config_args};
    use std::sync::Arc;
    use std::time::Duration;
    const SERVICES: usize = 12;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let config = tempfile::tempdir().unwrap();
    let opts = || Opts {
        args: config_args(config.path(), "alerting:\n  chatter: {flips: 0}\n"),
        ..Opts::default()
    };
    let Pair {
        dir,
        token,
        a,
        b,
        a_data,
        b_data,
    } = two_processes_with(|_| opts(), opts()).await;
    let two = partitions_shared(&[&a, &b], &token).await;
    assert!(two.iter().all(|h| h.len() == 8), "{two:?}");

    let c_data = dir.path().join("c");
    std::fs::create_dir_all(&c_data).unwrap();
    std::fs::copy(a_data.with_extension("pgdb"), c_data.with_extension("pgdb")).unwrap();
    std::fs::copy(a_data.join("master.key"), c_data.join("master.key")).unwrap();
    let c = Server::start_in(&c_data, opts());
    let three = partitions_shared(&[&a, &b, &c], &token).await;
    assert!(
        three.iter().all(|h| !h.is_empty()),
        "C took a share: {three:?}"
    );

    flipped_services(&a, &token, SERVICES).await;
    let data = [a_data, b_data, c_data];
    let mut servers = [Some(a), Some(b), Some(c)];
    // C, then B, then A (the leader): each killed while the one after it takes the results.
    for (round, victim) in [2usize, 1, 0].into_iter().enumerate() {
        let writer = servers[(victim + 1) % 3].as_ref().unwrap();
        let states = service_states(writer, &token).await;
        alerts_follow_states(writer, &token, &states, round).await;
        let writes = Arc::new(Round::default());
        let flippers = spawn_flippers(writer, &token, states, &writes);
        let then = Duration::from_millis(40 + 60 * round as u64);
        crash_under_load(servers[victim].take().unwrap(), &writes, 3 * SERVICES, then).await;
        // The flippers stop with the crash; the survivors decide what the victim held.
        for f in flippers {
            f.await.unwrap();
        }
        let writer = servers[(victim + 1) % 3].as_ref().unwrap();
        let states = service_states(writer, &token).await;
        alerts_follow_states(writer, &token, &states, round + 1).await;
        servers[victim] = Some(Server::start_in(&data[victim], opts()));
    }
    let all: Vec<&Server> = servers.iter().flatten().collect();
    partitions_shared(&all, &token).await;
    let states = service_states(all[0], &token).await;
    assert_eq!(states.len(), SERVICES);
    alerts_follow_states(all[0], &token, &states, 3).await;
}

/// Escalation timers follow the alert engine's partitions: each process fires the steps of
/// the alerts whose partitions it leads, on its own clock, so moving one process's clock fires
/// exactly its share; a process killed hands its alerts' timers to the one left, which fires
/// them once; started again, it repeats none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escalation_timers_follow_the_partitions_and_a_killed_processs_fire_elsewhere() {
    use super::receiver::Receiver;
    use super::support::{Opts, Server, advance, config_args, create_all, get, send, test_clock};
    use serde_json::json;
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;
    use uuid::Uuid;
    const ALERTS: usize = 24;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let clocks = tempfile::tempdir().unwrap();
    // Floods off: two dozen alarms at once would be held for a digest (docs/noise.md).
    let opts = |clock: &str| Opts {
        args: config_args(
            clocks.path(),
            "alerting:\n  flood: {enterAt: {alerts: 0, within: 1m}}\n",
        ),
        ..test_clock(&clocks.path().join(clock))
    };
    let Pair {
        dir: _dir,
        token,
        a,
        b,
        b_data,
        ..
    } = two_processes_with(|_| opts("a"), opts("b")).await;
    let hooks = Receiver::start().await;
    create_all(
        &a,
        &token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/contacts", json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "three", "steps": [
                {"after": 0, "notify": {"contact": "ada"}},
                {"after": "10m", "notify": {"contact": "ada"}},
                {"after": "20m", "notify": {"contact": "ada"}}]})),
            ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
        ],
    )
    .await;
    // One alarm on each of the host's services: their objects spread them over the partitions.
    let mut alerts: BTreeMap<String, u16> = BTreeMap::new();
    for i in 0..ALERTS {
        let service = send(
            &a,
            &token,
            reqwest::Method::POST,
            "/api/v1/services",
            json!({"name": format!("s{i}"), "host": "plc", "spec": {}}),
        )
        .await;
        let service = super::support::json(service, 201).await;
        let object: Uuid = service["id"].as_str().unwrap().parse().unwrap();
        let res = send(
            &a,
            &token,
            reqwest::Method::POST,
            "/api/v1/alerts",
            json!({"title": format!("s{i} down"), "escalationPolicy": "three", "objectId": object}),
        )
        .await;
        let alert = super::support::json(res, 201).await;
        let tenant: Uuid = alert["tenantId"].as_str().unwrap().parse().unwrap();
        let partition = svc::store::partition_of(svc::store::PARTITIONS, tenant, Some(object));
        alerts.insert(alert["id"].as_str().unwrap().to_string(), partition);
    }
    let paged = |step: u64| -> Vec<String> {
        hooks
            .received("/hook")
            .iter()
            .map(|r| r.json())
            .filter(|b| b["step"] == step)
            .map(|b| b["alert"]["id"].as_str().unwrap().to_string())
            .collect()
    };
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };
    hooks
        .wait_for("/hook", ALERTS, Duration::from_secs(20))
        .await;
    let all: Vec<String> = alerts.keys().cloned().collect();
    assert_eq!(sorted(paged(0)), all, "step 0 of each alert, once");

    let held = partitions_shared(&[&a, &b], &token).await;
    let a_held: BTreeSet<u16> = held[0].iter().map(|p| *p as u16).collect();
    let a_share: Vec<String> = alerts
        .iter()
        .filter(|(_, p)| a_held.contains(p))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(
        !a_share.is_empty() && a_share.len() < ALERTS,
        "the alerts spread over both processes: A has {} of {ALERTS}",
        a_share.len()
    );
    // A's clock alone moves: A fires the second step of its share, B (not yet there) none.
    advance(&a, &token, "10m").await;
    hooks
        .wait_for("/hook", ALERTS + a_share.len(), Duration::from_secs(20))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sorted(paged(1)), a_share, "A fired its share's second step");
    advance(&b, &token, "10m").await;
    hooks
        .wait_for("/hook", 2 * ALERTS, Duration::from_secs(20))
        .await;
    assert_eq!(sorted(paged(1)), all, "B fired the rest, none twice");

    // B killed once its deliveries are done (one sent but not yet marked so goes again, at
    // least once): A, its clock on at the third step, takes B's partitions and fires all.
    let started = std::time::Instant::now();
    while get(&a, &token, "/api/v1/system/health").await["notify"]["outbox"] != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the outbox never emptied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.crash();
    advance(&a, &token, "10m").await;
    hooks
        .wait_for("/hook", 3 * ALERTS, Duration::from_secs(30))
        .await;
    assert_eq!(
        sorted(paged(2)),
        all,
        "A fired the third step of every alert"
    );
    // B back, its clock behind A's: it takes its share again and repeats nothing.
    let b = Server::start_in(&b_data, opts("b"));
    partitions_shared(&[&a, &b], &token).await;
    advance(&b, &token, "10m").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        hooks.received("/hook").len(),
        3 * ALERTS,
        "no step fired twice"
    );
    let info = get(&b, &token, "/api/v1/system/info").await;
    assert!(
        info["enginePartitions"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
}

/// A first batch of many state changes opens every alert it should. The engine sends its reads
/// of the batch's objects ahead of their answers, and a statement first prepared behind them
/// (the storm correlation's read, on its first alert) once waited for ever: the connection held
/// its answer back behind their rows, and the writers' lock with it.
#[tokio::test]
async fn a_first_batch_of_many_state_changes_opens_its_alerts() {
    use super::support::{Admin, create_all, get, send};
    use reqwest::Method;
    use serde_json::json;
    use std::time::{Duration, Instant};
    const SERVICES: usize = 120;
    if !enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let mut bodies = vec![
        ("/api/v1/hosts", json!({"name": "rack", "spec": {}})),
        (
            "/api/v1/alert-rules",
            json!({"name": "failed", "match": "event.state == 'CRITICAL'", "severity": "critical"}),
        ),
    ];
    for i in 0..SERVICES {
        bodies.push((
            "/api/v1/services",
            json!({"name": format!("psu{i}"), "host": "rack", "spec": {}}),
        ));
    }
    create_all(s, token, bodies).await;
    // States of a kilobyte and more, so those read ahead take many of the connection's reads.
    let output = format!(
        "failed: {}",
        "the supply's output voltage fell; ".repeat(40)
    );
    let results: Vec<_> = (0..SERVICES)
        .map(|i| json!({"host": "rack", "service": format!("psu{i}"), "state": "CRITICAL", "output": output}))
        .collect();
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": results}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
    let started = Instant::now();
    loop {
        let open = get(s, token, "/api/v1/alerts?limit=500").await["items"]
            .as_array()
            .unwrap()
            .len();
        if open == SERVICES {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{open} of {SERVICES} alerts opened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
