//! A webhook provider on a local port for the notification and security tests: records every
//! request, answers with scripted statuses, headers and bodies (or the request's headers).

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub status: u16,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Extra headers and a body.
type Reply = (Vec<(String, String)>, Vec<u8>);

#[derive(Default)]
struct Script {
    /// Statuses to answer next, per path; then the path's default (else 200).
    queued: HashMap<String, VecDeque<u16>>,
    default: HashMap<String, u16>,
    /// Extra headers and the body to answer a path with (else `{"ok":true}`).
    replies: HashMap<String, Reply>,
    /// Paths whose answer's body is the request's headers as JSON.
    echo: std::collections::HashSet<String>,
    /// How many of the next requests to a path are held unanswered (a send that hangs).
    held: HashMap<String, usize>,
}

/// A webhook provider on a local port: records every request and answers as scripted.
pub struct Receiver {
    pub base: String,
    got: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        Self::start_on("127.0.0.1").await
    }

    /// A receiver on `address` (an address of this host's), on an ephemeral port.
    pub async fn start_on(address: &str) -> Receiver {
        let listener = tokio::net::TcpListener::bind((address, 0)).await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let script: Arc<Mutex<Script>> = Arc::default();
        let (g, sc) = (got.clone(), script.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (g, sc) = (g.clone(), sc.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (g, sc) = (g.clone(), sc.clone());
                            async move {
                                use http_body_util::BodyExt;
                                let path = req.uri().path().to_string();
                                let headers = req
                                    .headers()
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_string(),
                                            v.to_str().unwrap_or("").to_string(),
                                        )
                                    })
                                    .collect();
                                let body =
                                    req.into_body().collect().await.unwrap().to_bytes().to_vec();
                                let (status, extra, answer, hold) = {
                                    let mut s = sc.lock().unwrap();
                                    let queued =
                                        s.queued.get_mut(&path).and_then(VecDeque::pop_front);
                                    let status = queued
                                        .or_else(|| s.default.get(&path).copied())
                                        .unwrap_or(200);
                                    let (extra, answer) = if s.echo.contains(&path) {
                                        (Vec::new(), serde_json::to_vec(&headers).unwrap())
                                    } else {
                                        s.replies.get(&path).cloned().unwrap_or_else(|| {
                                            (Vec::new(), b"{\"ok\":true}".to_vec())
                                        })
                                    };
                                    let hold =
                                        s.held.get_mut(&path).filter(|n| **n > 0).map(|n| *n -= 1);
                                    (status, extra, answer, hold.is_some())
                                };
                                g.lock().unwrap().push(Received {
                                    path,
                                    headers,
                                    body,
                                    status,
                                });
                                if hold {
                                    std::future::pending::<()>().await;
                                }
                                let mut res = hyper::Response::builder().status(status);
                                for (k, v) in extra {
                                    res = res.header(k, v);
                                }
                                let res = res
                                    .body(http_body_util::Full::new(bytes::Bytes::from(answer)))
                                    .unwrap();
                                Ok::<_, std::convert::Infallible>(res)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver { base, got, script }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn queue(&self, path: &str, statuses: &[u16]) {
        let mut s = self.script.lock().unwrap();
        s.queued.entry(path.into()).or_default().extend(statuses);
    }

    pub fn answer(&self, path: &str, status: u16) {
        self.script
            .lock()
            .unwrap()
            .default
            .insert(path.into(), status);
    }

    /// Answers `path` with these headers and this body (and the scripted status).
    pub fn reply(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.script
            .lock()
            .unwrap()
            .replies
            .insert(path.into(), (headers, body.to_vec()));
    }

    /// Holds the next `n` requests to `path` unanswered, for as long as their sender waits.
    pub fn hold(&self, path: &str, n: usize) {
        self.script.lock().unwrap().held.insert(path.into(), n);
    }

    /// Answers `path` with the request's headers as a JSON body.
    pub fn echo_headers(&self, path: &str) {
        self.script.lock().unwrap().echo.insert(path.into());
    }

    pub fn received(&self, path: &str) -> Vec<Received> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// The webhook bodies of `kind` (`alert`, `notice`) for `contact` that reached `path`, each
    /// once (a delivery sent again after a kill -9, webhooks being at least once, counts once).
    pub fn bodies(&self, path: &str, kind: &str, contact: &str) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for b in self.received(path).iter().map(Received::json) {
            if b["kind"] == kind && b["contact"] == contact && !out.contains(&b) {
                out.push(b);
            }
        }
        out
    }

    /// Waits until `contact` has `n` bodies of `kind` at `path`; returns them.
    pub async fn until_bodies(
        &self,
        path: &str,
        kind: &str,
        contact: &str,
        n: usize,
    ) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let got = self.bodies(path, kind, contact);
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{contact} got {} of {n} {kind}: {got:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `path` has had `n` requests; returns them.
    pub async fn wait_for(&self, path: &str, n: usize, limit: Duration) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.received(path);
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < limit,
                "{path} got {} requests, not {n}: {got:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
