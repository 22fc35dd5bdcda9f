//! Starting the real server and talking to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_svc");

fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

pub fn client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// No default administrator seeding (for tests that count users or audit entries).
pub fn no_seed() -> Opts {
    Opts {
        env: vec![("SVC_DEFAULT_ADMIN_DISABLED".into(), "1".into())],
        ..Default::default()
    }
}

/// `--config FILE` arguments for a start, with `yaml` written to `svc.yaml` in `dir`.
pub fn config_args(dir: &Path, yaml: &str) -> Vec<String> {
    let file = dir.join("svc.yaml");
    std::fs::write(&file, yaml).unwrap();
    vec!["--config".into(), file.display().to_string()]
}

/// Options for a server whose `tls.caDirs` is the directory of `ca` (a peer's private CA),
/// so a channel or an event source may name it as `caFile`; the configuration file is
/// written beside it.
pub fn trusting_ca(ca: &Path) -> Opts {
    let dir = ca.parent().unwrap();
    Opts {
        args: config_args(dir, &format!("tls: {{caDirs: [{}]}}\n", dir.display())),
        ..Default::default()
    }
}

/// Options for one server start.
#[derive(Clone, Default)]
pub struct Opts {
    pub tls: bool,
    /// The listen address (an ephemeral port by default).
    pub listen: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// A command the server runs under, its arguments before the server's (`ip netns exec
    /// NAME`: a server on another host of the test's making).
    pub wrapper: Vec<String>,
}

pub struct Server {
    child: Option<Child>,
    pub base: String,
    pub data: PathBuf,
    _dir: Option<tempfile::TempDir>,
    pub http: reqwest::Client,
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut s = Self::start_in(&data, opts);
        s._dir = Some(dir);
        s
    }

    /// Starts a server on an existing data dir (restarts, crash tests).
    pub fn start_in(data: &Path, opts: Opts) -> Server {
        match Self::spawn_in(data, opts).within(Duration::from_secs(30)) {
            Ok(server) => server,
            Err(starting) => starting.fail(),
        }
    }

    /// Starts a server on an existing data dir without waiting for it to listen.
    pub fn spawn_in(data: &Path, opts: Opts) -> Starting {
        std::fs::create_dir_all(data).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data.with_extension("log"))
            .unwrap();
        let mut cmd = match opts.wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(BIN);
                cmd
            }
            None => Command::new(BIN),
        };
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(data)
            .args(["--listen", opts.listen.as_deref().unwrap_or("127.0.0.1:0")])
            .args(["--tls", if opts.tls { "auto" } else { "off" }])
            .args(&opts.args)
            .env_remove("SVC_CONFIG")
            .env("SVC_LOG", "info")
            .env("SVC_CRYPTO_POLICY", "fast");
        if super::postgres::enabled() {
            cmd.env("SERVICE_STORAGE_BACKEND", "postgres").env(
                "SERVICE_STORAGE_POSTGRES_URL",
                super::postgres::url_for(data),
            );
        }
        cmd.envs(opts.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("svc listening on ") {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        Starting {
            child: Some(child),
            data: data.to_path_buf(),
            listening: rx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data.with_extension("log")).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        signal(self.pid(), "TERM");
        let mut child = self.child.take().unwrap();
        wait_with_timeout(&mut child, Duration::from_secs(40))
    }

    /// Stops the server with SIGTERM (asserting a clean exit) and keeps its data directory.
    pub fn stop_keeping_data(mut self) -> Stopped {
        let dir = self._dir.take();
        let data = self.data.clone();
        assert!(self.stop().success(), "the server did not stop cleanly");
        Stopped { data, _dir: dir }
    }

    /// Stops the server cleanly and starts it again on the same data directory.
    pub fn restart(self) -> Server {
        self.stop_keeping_data().start(Opts::default())
    }

    /// Waits for the server to end on its own; its exit status.
    pub fn exits_within(mut self, limit: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        wait_with_timeout(&mut child, limit)
    }

    /// kill -9: no chance to flush anything.
    pub fn crash(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A server process that has not said where it listens yet; dropped, it is killed.
pub struct Starting {
    child: Option<Child>,
    data: PathBuf,
    listening: mpsc::Receiver<String>,
}

impl Starting {
    /// The server, once it listens within `limit`; else still starting.
    pub fn within(mut self, limit: Duration) -> Result<Server, Starting> {
        match self.listening.recv_timeout(limit) {
            Ok(base) => Ok(Server {
                child: self.child.take(),
                base,
                data: self.data.clone(),
                _dir: None,
                http: client(),
            }),
            Err(_) => Err(self),
        }
    }

    /// Kills it and fails the test with its log.
    pub fn fail(self) -> ! {
        let log = std::fs::read_to_string(self.data.with_extension("log")).unwrap_or_default();
        drop(self);
        panic!("server did not start; log:\n{log}");
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The data directory of a stopped server.
pub struct Stopped {
    pub data: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Stopped {
    pub fn start(mut self, opts: Opts) -> Server {
        let mut s = Server::start_in(&self.data, opts);
        s._dir = self._dir.take();
        s
    }
}

pub fn signal(pid: i32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

pub fn wait_with_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `svc` with arguments; returns (exit code, stdout, stderr).
pub fn svc(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("SVC_CONFIG")
        .env("SVC_CRYPTO_POLICY", "fast")
        // No credentials `svc login` may have left for the user running the tests.
        .env("XDG_CONFIG_HOME", "/nonexistent/svc-tests");
    // A command on a data directory reaches its store where the server keeps it; `restore`
    // writes a data directory of its own (a redb store), moved on the server's first start.
    if let Some(data) = args.windows(2).find(|w| w[0] == "--data-dir").map(|w| w[1])
        && super::postgres::enabled()
        && args.first() != Some(&"restore")
    {
        cmd.env("SERVICE_STORAGE_BACKEND", "postgres").env(
            "SERVICE_STORAGE_POSTGRES_URL",
            super::postgres::url_for(Path::new(data)),
        );
    }
    let out = cmd.envs(env.iter().copied()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts a response is the problem document of SPEC 7 and returns it.
pub async fn assert_problem(res: reqwest::Response, status: u16, code: &str) -> serde_json::Value {
    assert_eq!(res.status().as_u16(), status, "status of {}", res.url());
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    let path = res.url().path().to_string();
    let doc: serde_json::Value = res.json().await.unwrap();
    assert_eq!(doc["code"], code, "{doc}");
    assert_eq!(doc["status"], status);
    assert_eq!(doc["instance"], path);
    let expected_type = format!("/problems/{}", code.replace(':', "/"));
    assert!(
        doc["type"].as_str().unwrap().ends_with(&expected_type),
        "{doc}"
    );
    assert!(!doc["title"].as_str().unwrap().is_empty());
    if let Some(d) = doc.get("detail") {
        assert!(
            !d.as_str().unwrap().is_empty(),
            "empty detail must be omitted"
        );
    }
    doc
}

/// Opens the store of the stopped server on `data` in this process, on the backend the
/// servers of this run use.
/// Where the store of a server on `data` lives in this run: its data directory, or its
/// database when the suite runs on PostgreSQL.
pub fn backing(data: &Path) -> svc::store::Backing {
    #[cfg(feature = "postgres")]
    if super::postgres::enabled() {
        return svc::store::Backing::Postgres(svc::store::kv::pg::Target {
            url: super::postgres::url_for(data),
            tls_mode: "disable".into(),
            ca_file: None,
            pool_size: 2,
        });
    }
    #[cfg(not(feature = "postgres"))]
    let _ = data;
    svc::store::Backing::File
}

pub fn open_store(data: &Path) -> std::sync::Arc<svc::store::Store> {
    let clock = std::sync::Arc::new(svc::runtime::clock::SystemClock);
    svc::store::Store::open_on(data, clock, backing(data)).unwrap()
}

/// Asserts that the server's audit chain verifies.
pub async fn assert_chain_intact(s: &Server, token: &str) {
    let v = json(
        call(s, token, reqwest::Method::POST, "/api/v1/audit:verify")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(v["intact"], true, "{v}");
}

/// Whether `s` leads (its consumers run), as `GET /api/v1/system/info` says.
pub async fn leads(s: &Server, token: &str) -> bool {
    get(s, token, "/api/v1/system/info").await["leads"] == true
}

/// The names of the first 500 hosts the server lists.
pub async fn host_names(s: &Server, token: &str) -> Vec<String> {
    get(s, token, "/api/v1/hosts?limit=500").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["name"].as_str().map(str::to_string))
        .collect()
}

pub fn assert_uuid_v7(s: &str) {
    let id = uuid::Uuid::parse_str(s).unwrap();
    assert_eq!(id.get_version_num(), 7, "{s}");
    assert_eq!(s, s.to_lowercase());
    assert_eq!(s.len(), 36);
}

/// `svc bootstrap` on a stopped data dir: the bootstrap-admin secret.
pub fn bootstrap(data: &Path) -> String {
    let (code, out, err) = svc(&["bootstrap", "--data-dir", data.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

/// A server whose default tenant has the bootstrap-admin token.
pub struct Admin {
    pub s: Server,
    pub token: String,
}

impl Admin {
    pub fn start() -> Admin {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Admin {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let token = bootstrap(&data);
        let mut s = Server::start_in(&data, opts);
        s._dir = Some(dir);
        Admin { s, token }
    }
}

/// A request builder with a bearer token.
pub fn call(
    s: &Server,
    token: &str,
    method: reqwest::Method,
    path: &str,
) -> reqwest::RequestBuilder {
    s.http.request(method, s.url(path)).bearer_auth(token)
}

/// `POST /api/v1/config/bundles:apply` with a YAML bundle, sent.
pub async fn apply_bundle(s: &Server, token: &str, yaml: &str) -> reqwest::Response {
    call(
        s,
        token,
        reqwest::Method::POST,
        "/api/v1/config/bundles:apply",
    )
    .header("content-type", "application/yaml")
    .body(yaml.to_string())
    .send()
    .await
    .unwrap()
}

/// A request with a bearer token and a JSON body, sent.
pub async fn send(
    s: &Server,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: serde_json::Value,
) -> reqwest::Response {
    call(s, token, method, path)
        .json(&body)
        .send()
        .await
        .unwrap()
}

pub async fn json(res: reqwest::Response, status: u16) -> serde_json::Value {
    let code = res.status().as_u16();
    let url = res.url().to_string();
    let text = res.text().await.unwrap();
    assert_eq!(code, status, "{url}: {text}");
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// Mints a token with the given body; returns (secret, meta).
pub async fn mint(s: &Server, token: &str, body: serde_json::Value) -> (String, serde_json::Value) {
    let v = json(
        call(s, token, reqwest::Method::POST, "/api/v1/api-tokens")
            .json(&body)
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    (v["token"].as_str().unwrap().to_string(), v["meta"].clone())
}

/// Returns once everything committed so far is durable: a read may see a write whose group
/// is still syncing, which a kill -9 then loses. A write of its own (a token) is answered
/// only after its group's sync, which covers every commit before it.
pub async fn durable_so_far(s: &Server, admin: &str) {
    static MARKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mark = MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("durable-{mark}");
    mint(
        s,
        admin,
        serde_json::json!({"name": name, "roles": ["viewer"]}),
    )
    .await;
}

/// A second tenant and an administrator token living in it (without `admin:tenants`, so it
/// cannot select another tenant): the other side of every tenant-isolation check.
pub async fn second_tenant(s: &Server, admin: &str, slug: &str) -> (String, String) {
    let t = json(
        call(s, admin, reqwest::Method::POST, "/api/v1/tenants")
            .json(&serde_json::json!({"name": slug, "slug": slug}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let id = t["id"].as_str().unwrap().to_string();
    let scopes = [
        "objects:*",
        "config:*",
        "admin:tokens",
        "admin:users",
        "admin:audit",
        "admin:read",
        "admin:write",
        "alerts:*",
        "incidents:*",
        "events:*",
        "oncall:*",
        "downtimes:*",
        "silences:*",
        "checks:*",
        "metrics:*",
    ];
    let (secret, _) = mint_in(
        s,
        admin,
        &id,
        serde_json::json!({"name": format!("{slug}-admin"), "scopes": scopes}),
    )
    .await;
    (id, secret)
}

/// `POST /api/v1/objects/{id}/check-now`.
pub async fn check_now(s: &Server, token: &str, id: &str) -> reqwest::Response {
    call(
        s,
        token,
        reqwest::Method::POST,
        &format!("/api/v1/objects/{id}/check-now"),
    )
    .send()
    .await
    .unwrap()
}

/// The default tenant's id, as `admin` (who may list tenants) sees it.
pub async fn default_tenant(s: &Server, admin: &str) -> String {
    get(s, admin, "/api/v1/tenants").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["slug"] == "default")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Mints a token in another tenant through `X-Service-Tenant`.
pub async fn mint_in(
    s: &Server,
    admin: &str,
    tenant: &str,
    body: serde_json::Value,
) -> (String, serde_json::Value) {
    let v = json(
        call(s, admin, reqwest::Method::POST, "/api/v1/api-tokens")
            .header("X-Service-Tenant", tenant)
            .json(&body)
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    (v["token"].as_str().unwrap().to_string(), v["meta"].clone())
}

/// Proves a tenant cannot see or touch another tenant's resource: every request answers 404
/// `svc:not-found`, and no list of its own shows the resource's id.
pub async fn assert_isolated(
    s: &Server,
    other_token: &str,
    requests: &[(reqwest::Method, String)],
    lists: &[&str],
    id: &str,
) {
    for (method, path) in requests {
        let res = call(s, other_token, method.clone(), path)
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_problem(res, 404, "svc:not-found").await;
    }
    for list in lists {
        let body = json(
            call(s, other_token, reqwest::Method::GET, list)
                .send()
                .await
                .unwrap(),
            200,
        )
        .await;
        assert!(
            !body.to_string().contains(id),
            "{list} of another tenant shows {id}"
        );
    }
}

/// A free local TCP port (bound and released; good enough for a peer started next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer's process, stopped (killed and reaped) when dropped.
pub struct Peer(pub Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns a peer program (an interoperability peer from a Debian package), or `None` with a
/// note where it is not installed; in CI, which installs them, its absence fails the test.
pub fn spawn_peer(cmd: &mut Command, package: &str) -> Option<Child> {
    match cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn() {
        Ok(child) => Some(child),
        Err(_) => {
            peer_missing(package);
            None
        }
    }
}

/// Says a peer program is missing: a failure in CI, a skip elsewhere.
pub fn peer_missing(package: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{package} is required in CI (.ci/run installs it)"
    );
    eprintln!("SKIPPED: {package} is not installed");
}

impl Peer {
    /// Waits until something listens on the local TCP `port`, and fails at once when the peer
    /// exits first. Up to a minute: beside a whole CI run (the static builds, the other tests'
    /// servers) node once took more than 10 s to load the OIDC provider's modules.
    pub fn wait_listening(&mut self, port: u16, what: &str) {
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.0.try_wait() {
                panic!("{what} exited ({status}) before it listened on port {port}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what} did not listen on port {port} within a minute"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A private CA and a certificate it signed for 127.0.0.1, written to `dir`: the CA's
/// certificate (what a client trusts), the certificate and its key.
pub fn private_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "svc test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let (ca, cert_file, key_file) = (
        dir.join("ca.pem"),
        dir.join("server-cert.pem"),
        dir.join("server-key.pem"),
    );
    std::fs::write(&ca, ca_cert.pem()).unwrap();
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (ca, cert_file, key_file)
}

/// Creates each (path, body) in order, expecting 201.
pub async fn create_all(s: &Server, token: &str, items: Vec<(&str, serde_json::Value)>) {
    for (path, body) in items {
        let res = send(s, token, reqwest::Method::POST, path, body.clone()).await;
        assert_eq!(
            res.status().as_u16(),
            201,
            "{path} {body}: {}",
            res.text().await.unwrap()
        );
    }
}

/// GET `path`, expecting 200 with JSON.
pub async fn get(s: &Server, token: &str, path: &str) -> serde_json::Value {
    json(
        call(s, token, reqwest::Method::GET, path)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await
}

/// Base64 of `bytes` written here, apart from the server's: standard with padding, or
/// URL-safe without (`url`), as a dashboard's layout and a browser's push keys are sent.
pub fn base64_of(bytes: &[u8], url: bool) -> String {
    let alphabet: &[u8] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if !url {
                out.push('=');
            }
        }
    }
    out
}

/// The actions of the acting tenant's newest `limit` audit entries, newest first.
pub async fn audit_actions(s: &Server, token: &str, limit: usize) -> Vec<String> {
    let audit = get(s, token, &format!("/api/v1/audit?limit={limit}")).await;
    audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect()
}

/// A form posted as a browser posts it.
pub async fn post_form(s: &Server, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
    s.http
        .post(s.url(path))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).unwrap())
        .send()
        .await
        .unwrap()
}

/// The `svc_session` value a response sets, and the whole Set-Cookie header.
pub fn session_of(res: &reqwest::Response) -> (String, String) {
    let header = res.headers()["set-cookie"].to_str().unwrap().to_string();
    let value = header
        .split(';')
        .next()
        .unwrap()
        .strip_prefix("svc_session=")
        .unwrap()
        .to_string();
    (value, header)
}

/// `GET /api/v1/whoami` with a session cookie.
pub async fn whoami_cookie(s: &Server, session: &str) -> reqwest::Response {
    s.http
        .get(s.url("/api/v1/whoami"))
        .header("Cookie", format!("svc_session={session}"))
        .send()
        .await
        .unwrap()
}

/// `POST /login` with the password form.
pub async fn login(s: &Server, email: &str, password: &str, remember: bool) -> reqwest::Response {
    let mut f = vec![("email", email), ("password", password)];
    if remember {
        f.push(("remember", "1"));
    }
    post_form(s, "/login", &f).await
}

/// Options for a server whose clock the test moves (`SVC_TEST_CLOCK`, debug builds only),
/// the offset kept in `file` so a server started again goes on at the same time.
pub fn test_clock(file: &Path) -> Opts {
    Opts {
        env: vec![("SVC_TEST_CLOCK".into(), file.display().to_string())],
        ..Opts::default()
    }
}

/// A data directory with its administrator's token, for servers on the clock the test
/// moves that it starts (and starts again, after a kill -9) there.
pub struct Clocked {
    _dir: tempfile::TempDir,
    pub data: PathBuf,
    clock: PathBuf,
    pub token: String,
}

impl Clocked {
    pub fn new() -> Clocked {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let token = bootstrap(&data);
        let clock = dir.path().join("clock");
        Clocked {
            _dir: dir,
            data,
            clock,
            token,
        }
    }

    /// A server on the data directory, its clock where the last one's stopped.
    pub fn start(&self) -> Server {
        self.start_with(Opts::default())
    }

    /// As `start`, with `opts` (a configuration file) besides.
    pub fn start_with(&self, mut opts: Opts) -> Server {
        opts.env.extend(test_clock(&self.clock).env);
        Server::start_in(&self.data, opts)
    }
}

/// Moves the server's test clock on by `by` (`"30m"`); its time after.
pub async fn advance(s: &Server, token: &str, by: &str) -> jiff::Timestamp {
    let res = call(
        s,
        token,
        reqwest::Method::POST,
        "/api/v1/system/clock:advance",
    )
    .json(&serde_json::json!({"by": by}))
    .send()
    .await
    .unwrap();
    json(res, 200).await["now"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
