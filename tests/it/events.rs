//! The event store, list, export and live stream, against the spawned server.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn events(s: &Server, token: &str, query: &str) -> Value {
    json(
        call(s, token, Method::GET, &format!("/api/v1/events{query}"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().unwrap().clone()
}

async fn new_tenant(s: &Server, token: &str, slug: &str) -> String {
    let t = json(
        call(s, token, Method::POST, "/api/v1/tenants")
            .json(&json!({"name": slug, "slug": slug}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    t["id"].as_str().unwrap().to_string()
}

/// An open SSE response and the text read from it so far.
struct Sse {
    res: reqwest::Response,
    buf: String,
}

impl Sse {
    async fn open(s: &Server, token: &str, query: &str, last_id: Option<&str>) -> Sse {
        let mut req = call(s, token, Method::GET, &format!("/api/v1/stream{query}"));
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        Sse {
            res,
            buf: String::new(),
        }
    }

    /// The next complete frame, or None after `wait` without one.
    async fn frame(&mut self, wait: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let f = self.buf[..end].to_string();
                self.buf.drain(..end + 2);
                return Some(f);
            }
            let chunk = tokio::time::timeout_at(deadline, self.res.chunk())
                .await
                .ok()?
                .ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next frame that is an event (pings skipped), parsed.
    async fn event(&mut self, wait: Duration) -> Option<(String, String, Value)> {
        loop {
            let f = self.frame(wait).await?;
            if f.starts_with(':') {
                continue;
            }
            let field = |name: &str| {
                f.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            let kind = field("event:")?;
            let id = field("id:").unwrap_or_default();
            let data = serde_json::from_str(&field("data:")?).unwrap();
            return Some((kind, id, data));
        }
    }
}

#[tokio::test]
async fn mutations_are_events_listed_newest_first() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let (_, meta) = mint(
        s,
        &a.token,
        json!({"name": "e1", "scopes": ["objects:read"]}),
    )
    .await;
    new_tenant(s, &a.token, "ev-b").await;
    let all = items(&events(s, &a.token, "").await);
    // bootstrap's token.create, then this token.create; the tenant's event is in that tenant.
    assert_eq!(all.len(), 2, "{all:?}");
    let e = &all[0];
    assert_eq!(e["type"], "config");
    assert_eq!(e["severity"], "info");
    assert_eq!(e["payload"]["kinds"], json!(["api-tokens"]));
    assert_eq!(
        e["payload"]["resource"],
        format!("api-token/{}", meta["id"].as_str().unwrap())
    );
    assert_uuid_v7(e["id"].as_str().unwrap());
    assert!(e["ts"].as_str().unwrap().ends_with('Z'));
    assert!(
        all[0]["id"].as_str() > all[1]["id"].as_str(),
        "newest first"
    );

    for (query, n) in [
        ("?types=config", 2),
        ("?types=config,ack", 2),
        ("?types=ack", 0),
        ("?types=bogus", 0),
        ("?severity=info", 2),
        ("?severity=critical", 0),
        ("?objectId=0190a000-0000-7000-8000-000000000000", 0),
        ("?sourceId=nowhere", 0),
        ("?from=yesterday&to=garbage", 2),
        ("?from=2099-01-01T00:00:00Z", 0),
        ("?to=2000-01-01T00:00:00Z", 0),
    ] {
        assert_eq!(items(&events(s, &a.token, query).await).len(), n, "{query}");
    }
    let page = events(s, &a.token, "?limit=1").await;
    assert_eq!(items(&page).len(), 1);
    let cursor = page["nextCursor"].as_str().unwrap();
    assert_eq!(cursor, all[0]["id"]);
    let rest = events(s, &a.token, &format!("?limit=1&cursor={cursor}")).await;
    assert_eq!(items(&rest)[0]["id"], all[1]["id"]);
    assert_problem(s.get("/api/v1/events").await, 401, "svc:auth/required").await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(
        call(s, &viewer, Method::GET, "/api/v1/events")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (nothing, _) = mint(
        s,
        &a.token,
        json!({"name": "n", "scopes": ["objects:read"]}),
    )
    .await;
    assert_problem(
        call(s, &nothing, Method::GET, "/api/v1/events")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
}

#[tokio::test]
async fn events_are_durable_and_exported_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let s = Server::start_in(&data, no_seed());
    for i in 0..5 {
        mint(
            &s,
            &token,
            json!({"name": format!("x{i}"), "scopes": ["objects:read"]}),
        )
        .await;
    }
    assert!(s.stop().success());
    let month = jiff::Timestamp::now().strftime("%Y%m").to_string();
    if super::postgres::enabled() {
        assert!(
            super::postgres::event_partitions(&data).contains(&format!("events_{month}")),
            "one partition per month"
        );
    } else {
        assert!(
            data.join(format!("events-{month}.redb")).exists(),
            "one file per month"
        );
    }
    let s = Server::start_in(&data, no_seed());
    let listed = items(&events(&s, &token, "").await);
    assert_eq!(listed.len(), 6);
    let res = call(&s, &token, Method::GET, "/api/v1/events:export")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = res
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    let ids: Vec<&str> = lines.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ascending");
    assert_eq!(lines[0]["id"], listed[5]["id"]);
    let filtered = call(&s, &token, Method::GET, "/api/v1/events:export?types=ack")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(filtered.is_empty());
}

#[tokio::test]
async fn events_are_tenant_isolated() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    mint(
        s,
        &a.token,
        json!({"name": "home", "scopes": ["objects:read"]}),
    )
    .await;
    let (tb, other) = second_tenant(s, &a.token, "ev-iso").await;
    let mut stream_b = Sse::open(s, &other, "", None).await;
    mint(
        s,
        &a.token,
        json!({"name": "home2", "scopes": ["objects:read"]}),
    )
    .await;
    let seen = items(&events(s, &other, "").await);
    // B sees only its own: its creation and the token minted into it.
    assert!(
        seen.iter().all(|e| e["tenantId"] == tb.as_str()),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 2);
    let export = call(s, &other, Method::GET, "/api/v1/events:export")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(export.lines().count(), 2);
    assert!(
        stream_b.event(Duration::from_millis(700)).await.is_none(),
        "tenant A's event leaked into B's stream"
    );
}

#[tokio::test]
async fn the_stream_frames_filters_and_replays() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let mut all = Sse::open(s, &a.token, "", None).await;
    let mut acks_only = Sse::open(s, &a.token, "?types=ack", None).await;
    let mut labelled = Sse::open(s, &a.token, "?selector=team%3Dops", None).await;
    let mut unlabelled = Sse::open(s, &a.token, "?selector=!team", None).await;
    let health: Value = s.get("/api/v1/system/health").await.json().await.unwrap();
    assert_eq!(health["sseClients"], 4);
    assert!(health["queues"]["main"].is_number());

    let (_, meta) = mint(
        s,
        &a.token,
        json!({"name": "live", "scopes": ["objects:read"]}),
    )
    .await;
    let (kind, id, data) = all.event(Duration::from_secs(5)).await.expect("a frame");
    assert_eq!(kind, "config");
    assert_eq!(data["id"], id);
    assert_eq!(
        data["payload"]["resource"],
        format!("api-token/{}", meta["id"].as_str().unwrap())
    );
    assert!(unlabelled.event(Duration::from_secs(5)).await.is_some());
    assert!(acks_only.event(Duration::from_millis(300)).await.is_none());
    assert!(labelled.event(Duration::from_millis(300)).await.is_none());

    // Two more, then a reconnect with Last-Event-ID replays from one second before it.
    mint(
        s,
        &a.token,
        json!({"name": "r2", "scopes": ["objects:read"]}),
    )
    .await;
    mint(
        s,
        &a.token,
        json!({"name": "r3", "scopes": ["objects:read"]}),
    )
    .await;
    let r2 = all.event(Duration::from_secs(5)).await.unwrap().1;
    let r3 = all.event(Duration::from_secs(5)).await.unwrap().1;
    let mut again = Sse::open(s, &a.token, "", Some(&id)).await;
    let mut replayed = Vec::new();
    while let Some((_, rid, _)) = again.event(Duration::from_millis(500)).await {
        replayed.push(rid);
    }
    // Everything persisted from one second before `id` on, oldest first: `id` itself included.
    let tail = &replayed[replayed.len().saturating_sub(3)..];
    assert_eq!(tail, [id.clone(), r2, r3], "{replayed:?}");
    let id_ms = uuid::Uuid::parse_str(&id)
        .unwrap()
        .get_timestamp()
        .unwrap()
        .to_unix();
    for r in &replayed {
        let ms = uuid::Uuid::parse_str(r)
            .unwrap()
            .get_timestamp()
            .unwrap()
            .to_unix();
        assert!(
            ms.0 * 1000 + u64::from(ms.1 / 1_000_000) + 1000
                >= id_ms.0 * 1000 + u64::from(id_ms.1 / 1_000_000)
        );
    }

    // Bad filters are a plain 400.
    let res = call(
        s,
        &a.token,
        Method::GET,
        "/api/v1/stream?selector=a%20in%20(",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 400);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_problem(s.get("/api/v1/stream").await, 401, "svc:auth/required").await;
}

#[tokio::test]
async fn the_stream_pings_every_15_seconds() {
    let a = Admin::start_with(no_seed());
    let mut sse = Sse::open(&a.s, &a.token, "", None).await;
    let start = tokio::time::Instant::now();
    let f = sse.frame(Duration::from_secs(20)).await.expect("a ping");
    assert_eq!(f, ": ping");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(14) && waited <= Duration::from_secs(17),
        "{waited:?}"
    );
}

#[tokio::test]
async fn a_slow_client_is_told_to_resync() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let addr: std::net::SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    // A client with a tiny receive window that stops reading after the headers.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(addr).await.unwrap();
    let req = format!(
        "GET /api/v1/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        a.token
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 512];
    let n = conn.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));

    // More events in this tenant than the 512-frame buffer and the socket buffers hold.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (base, token) = (s.base.clone(), a.token.clone());
            tokio::spawn(async move {
                let http = client();
                for i in 0..500 {
                    let email = format!("flood-{w}-{i}@example.org");
                    let res = http
                        .post(format!("{base}/api/v1/users"))
                        .bearer_auth(&token)
                        .json(&json!({"name": "f", "email": email}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(res.status(), 201);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let dropped = s.get("/metrics").await.text().await.unwrap();
    assert!(
        dropped
            .lines()
            .any(|l| l.starts_with("np_bus_frames_dropped_total{queue=\"sse\"}")),
        "no frame was dropped"
    );
    // Now read: somewhere in the stream the server said resync. The receive buffer grows
    // first: one smaller than a loopback segment advertises no window as it is read, so the
    // server would wait for its zero-window probes, whose back-off grew through the flood
    // (a minute under load). The deadline still covers that back-off's most (120 s).
    socket2::SockRef::from(&conn)
        .set_recv_buffer_size(1 << 20)
        .unwrap();
    let mut text = String::new();
    let mut buf = vec![0u8; 65536];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(130);
    let mut told = false;
    while !told {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            _ => break,
        }
        told = text.contains("event: resync");
        // Keep only a tail that can hold a frame cut between two reads: the stream is long.
        if text.len() > 1 << 20 {
            let cut = text.floor_char_boundary(text.len() - 4096);
            text.drain(..cut);
        }
    }
    assert!(told, "no resync frame");
}
