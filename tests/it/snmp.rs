//! SNMP polling (issue 74): the `snmp` and `snmp-walk` built-ins against a real agent, Debian's
//! `snmpd`, started by the test on a free loopback port with a v2c community and a v3 user
//! (SHA and AES, authPriv); the interfaces table is the machine's own.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const COMMUNITY: &str = "field-c0mmunity";
const V3: [&str; 10] = [
    "-P", "3", "-U", "ada", "-L", "authPriv", "-a", "SHA", "-x", "AES",
];

/// `snmpd` on a free port of 127.0.0.1 with `COMMUNITY` and the v3 user `ada` (its directory,
/// itself, the port), or `None` where it is missing.
fn agent_on_free_port() -> Option<(tempfile::TempDir, Peer, u16)> {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let agent = agent_at(dir.path(), &format!("127.0.0.1:{port}"))?;
    Some((dir, agent, port))
}

fn agent_at(dir: &std::path::Path, listen: &str) -> Option<Peer> {
    let conf = dir.join("snmpd.conf");
    std::fs::write(
        &conf,
        format!(
            "agentAddress udp:{listen}\nrocommunity {COMMUNITY} 127.0.0.0/8\n\
             createUser ada SHA \"auth-pass-1\" AES \"priv-pass-1\"\nrouser ada priv\n"
        ),
    )
    .unwrap();
    let child = spawn_peer(
        Command::new("/usr/sbin/snmpd")
            .args(["-f", "-C", "-c"])
            .arg(&conf)
            .args(["-Lf"])
            .arg(dir.join("log"))
            .env("SNMP_PERSISTENT_DIR", dir.join("state")),
        "snmpd",
    )?;
    Some(Peer(child))
}

async fn test_check(s: &Server, token: &str, builtin: &str, args: &[&str]) -> Value {
    json(
        call(s, token, Method::POST, "/api/v1/check-commands:test")
            .json(&json!({"builtin": builtin, "address": "127.0.0.1", "args": args}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await
}

fn output(v: &Value) -> &str {
    v["output"].as_str().unwrap()
}

/// v2c and v3 GETs, thresholds, GETNEXT, rates across two readings, an interface's row, walks
/// (bounded, and one of thousands of rows), and what a wrong credential or a silent agent
/// reads as.
#[tokio::test]
async fn a_device_is_polled_over_v2c_and_v3_with_thresholds_rates_and_bounded_walks() {
    let Some((_dir, _agent, port)) = agent_on_free_port() else {
        return;
    };
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let p = port.to_string();
    let v2 = |more: &[&str]| {
        let mut args = vec!["-p", p.as_str(), "-C", COMMUNITY, "-t", "2"];
        args.extend_from_slice(more);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let run = |builtin: &'static str, args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        test_check(s, t, builtin, &refs).await
    };
    // The agent takes a moment to listen.
    let started = Instant::now();
    let up = loop {
        let v = run("snmp", v2(&["-o", "sysUpTime.0", "-e", "0"])).await;
        if v["state"] == 0 || started.elapsed() > Duration::from_secs(20) {
            break v;
        }
    };
    assert_eq!(up["state"], 0, "{up}");
    assert!(output(&up).starts_with("SNMP OK - sysUpTime.0 = "), "{up}");
    assert!(
        up["perfdata"]
            .as_str()
            .unwrap()
            .starts_with("'sysUpTime.0'="),
        "{up}"
    );

    // v3 with authentication and privacy: the same agent, its name as text.
    let mut v3: Vec<String> = V3.iter().map(|a| a.to_string()).collect();
    v3.extend(
        [
            "-p",
            &p,
            "-A",
            "auth-pass-1",
            "-X",
            "priv-pass-1",
            "-t",
            "2",
        ]
        .map(String::from),
    );
    let mut named = v3.clone();
    named.extend(["-o", "sysName.0", "-r", "."].map(String::from));
    let name = run("snmp", named).await;
    assert_eq!(name["state"], 0, "{name}");
    assert!(
        output(&name).starts_with("SNMP OK - sysName.0 = \""),
        "{name}"
    );
    let mut wrong = v3.clone();
    wrong[13] = "auth-pass-2".into();
    wrong.extend(["-o", "sysName.0"].map(String::from));
    let refused = run("snmp", wrong).await;
    assert_eq!(
        refused["state"], 3,
        "the device is up, the check is wrong: {refused}"
    );
    assert!(
        output(&refused).contains("refused the v3 credentials"),
        "{refused}"
    );
    assert!(!output(&refused).contains("auth-pass"), "{refused}");
    let mut stranger = v3.clone();
    stranger[3] = "bob".into();
    stranger.extend(["-o", "sysName.0"].map(String::from));
    let unknown_user = run("snmp", stranger).await;
    assert_eq!(unknown_user["state"], 3, "{unknown_user}");

    // A wrong community gets no answer at all: CRITICAL after the tries, within `-t`.
    let took = Instant::now();
    let silent = run(
        "snmp",
        vec![
            "-p".into(),
            p.clone(),
            "-C".into(),
            "not-it".into(),
            "-t".into(),
            "1".into(),
            "-o".into(),
            "sysUpTime.0".into(),
        ],
    )
    .await;
    assert_eq!(silent["state"], 2, "{silent}");
    assert!(
        output(&silent).contains("no answer from 127.0.0.1"),
        "{silent}"
    );
    assert!(
        took.elapsed() < Duration::from_secs(5),
        "{:?}",
        took.elapsed()
    );

    // Thresholds per OID, on a number and on a string; GETNEXT; v1.
    let lo_up = run(
        "snmp",
        v2(&["-o", "ifOperStatus.1,ifNumber.0", "-c", "1:1,1:"]),
    )
    .await;
    assert_eq!(lo_up["state"], 0, "{lo_up}");
    let lo_critical = run(
        "snmp",
        v2(&["-o", "ifOperStatus.1", "-c", "2:", "-l", "lo"]),
    )
    .await;
    assert_eq!(lo_critical["state"], 2, "{lo_critical}");
    assert_eq!(lo_critical["perfdata"], "'lo'=1;;2:", "{lo_critical}");
    let lo_name = run("snmp", v2(&["-o", "ifDescr.1", "-s", "lo"])).await;
    assert_eq!(lo_name["state"], 0, "{lo_name}");
    let not_lo = run("snmp", v2(&["-o", "ifDescr.1", "-s", "eth9"])).await;
    assert_eq!(not_lo["state"], 2, "{not_lo}");
    let next = run("snmp", v2(&["-n", "-o", "sysDescr"])).await;
    assert!(
        output(&next).starts_with("SNMP OK - sysDescr.0 = "),
        "{next}"
    );
    let missing = run("snmp", v2(&["-o", "sysDescr.7"])).await;
    assert_eq!(missing["state"], 3, "{missing}");
    assert!(output(&missing).contains("no such"), "{missing}");
    for bad in [["-t", "nan"], ["-P", "4"], ["-o", "sysUptime.0"]] {
        let refused = run("snmp", v2(&["-o", "sysUpTime.0", bad[0], bad[1]])).await;
        assert_eq!(refused["state"], 3, "{bad:?}: {refused}");
    }
    let v1 = run("snmp", v2(&["-P", "1", "-o", "1.3.6.1.2.1.1.3.0"])).await;
    assert_eq!(v1["state"], 0, "{v1}");

    // A rate a second between two readings: the first has none and is OK, the second has
    // one. sysUpTime counts hundredths of a second (the agent caches its interface counters
    // for seconds, so their rate over a moment is zero).
    let first = run("snmp", v2(&["-o", "sysUpTime.0", "--rate"])).await;
    assert_eq!(first["state"], 0, "{first}");
    assert!(output(&first).contains("no earlier reading"), "{first}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = run("snmp", v2(&["-o", "sysUpTime.0", "--rate", "-c", "50:150"])).await;
    assert_eq!(second["state"], 0, "about 100 a second: {second}");
    assert!(
        second["perfdata"]
            .as_str()
            .unwrap()
            .starts_with("'sysUpTime.0'="),
        "{second}"
    );

    // One interface's row, by name: status, then traffic and errors as rates.
    let lo = run("snmp", v2(&["--interface", "lo"])).await;
    assert_eq!(lo["state"], 0, "{lo}");
    assert!(output(&lo).starts_with("SNMP OK - lo is up"), "{lo}");
    let lo = run("snmp", v2(&["--interface", "lo"])).await;
    assert!(output(&lo).contains(", in "), "{lo}");
    assert!(
        lo["perfdata"].as_str().unwrap().contains("'in_bps'="),
        "{lo}"
    );
    let absent = run("snmp", v2(&["--interface", "wlan9"])).await;
    assert_eq!(absent["state"], 3, "{absent}");

    // Walks: the interfaces with the check for each; a subtree over its bound is refused
    // whole; the whole agent, thousands of rows, within the bound asked.
    let mut v3_table = v3.clone();
    v3_table.push("--interfaces".into());
    let table = run("snmp-walk", v3_table).await;
    assert_eq!(table["state"], 0, "{table}");
    assert!(
        table["longOutput"]
            .as_str()
            .unwrap()
            .starts_with("1 lo up: snmp --interface lo\n"),
        "{table}"
    );
    let over = run("snmp-walk", v2(&["-o", "1.3.6.1", "--max-rows", "100"])).await;
    assert_eq!(over["state"], 3, "{over}");
    assert!(output(&over).contains("more than 100 rows"), "{over}");
    let all = v2(&[
        "-o",
        "1.3.6.1",
        "--max-rows",
        "10000",
        "-t",
        "30",
        "-w",
        ":1",
    ]);
    // The agent's whole tree: about 8,000 rows on a quiet machine, more than 10,000 beside
    // a test suite's connections and processes; either way walked to the bound and no further.
    let everything = run("snmp-walk", all).await;
    match everything["perfdata"].as_str() {
        Some(perf) => {
            let rows: usize = perf["'rows'=".len()..]
                .split(';')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(rows > 1_000, "{rows} rows: {}", output(&everything));
            assert_eq!(
                everything["state"], 1,
                "-w :1 on the row count: {everything}"
            );
        }
        None => assert!(
            output(&everything).contains("more than 10000 rows"),
            "{everything}"
        ),
    }
    let bad = run("snmp-walk", v2(&["-o", "1.3.6.1", "--max-rows", "20000"])).await;
    assert_eq!(bad["state"], 3, "{bad}");
}

/// A service polls its device with the community and the v3 passphrases as secrets: its
/// results come in on their schedule, its values become metric series, and the secrets'
/// values appear nowhere in what is stored. The host's interfaces become a service each.
#[tokio::test]
async fn a_service_polls_with_secret_credentials_and_its_values_become_series() {
    let Some((_dir, _agent, port)) = agent_on_free_port() else {
        return;
    };
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    for (name, value) in [
        ("snmp-community", COMMUNITY),
        ("snmp-auth", "auth-pass-1"),
        ("snmp-priv", "priv-pass-1"),
    ] {
        let put = call(s, t, Method::PUT, &format!("/api/v1/secrets/{name}"))
            .json(&json!({"value": value}))
            .send()
            .await
            .unwrap();
        assert!(put.status().is_success(), "{}", put.status());
    }
    create_all(
        s,
        t,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": "ups", "spec": {"address": "127.0.0.1"}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "uptime", "host": "ups", "spec": {"checkCommand": "snmp", "interval": 1,
                    "args": ["-p", port.to_string(), "-C", "$SECRET:snmp-community$", "-o", "sysUpTime.0,ifNumber.0", "-l", "uptime,interfaces"]}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "secure", "host": "ups", "spec": {"checkCommand": "snmp", "interval": 1,
                    "args": ["-p", port.to_string(), "-P", "3", "-U", "ada", "-A", "$SECRET:snmp-auth$", "-X", "$SECRET:snmp-priv$", "-o", "ifNumber.0", "-w", "0:"]}}),
            ),
        ],
    )
    .await;
    let started = Instant::now();
    let (uptime, secure) = loop {
        let list = get(s, t, "/api/v1/services?limit=10").await;
        let state = |name: &str| {
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["name"] == name)
                .map(|o| o["state"].clone())
                .unwrap_or_default()
        };
        let (u, v) = (state("uptime"), state("secure"));
        if u["state"] == 0 && v["state"] == 0 {
            break (u, v);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never polled: {u} {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        uptime["output"].as_str().unwrap().contains("uptime = "),
        "{uptime}"
    );
    assert!(
        secure["output"]
            .as_str()
            .unwrap()
            .starts_with("SNMP OK - ifNumber.0 = "),
        "{secure}"
    );
    let services = get(s, t, "/api/v1/services?limit=10").await;
    let text = services.to_string();
    for secret in [COMMUNITY, "auth-pass-1", "priv-pass-1"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let id = services["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "uptime")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A service per interface, from the host's agent, with the credentials as written.
    let hosts = get(s, t, "/api/v1/hosts").await;
    let ups = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let interfaces = |body: Value| {
        call(
            s,
            t,
            Method::POST,
            &format!("/api/v1/hosts/{ups}/snmp-interfaces"),
        )
        .json(&body)
        .send()
    };
    let agent_args = json!(["-p", port.to_string(), "-C", "$SECRET:snmp-community$"]);
    let listed = json(interfaces(json!({"args": agent_args})).await.unwrap(), 200).await;
    let lo = listed["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "lo")
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    assert_eq!(lo["status"], "up", "{lo}");
    assert_eq!(lo["service"], "if lo", "{lo}");
    assert_eq!(
        lo["args"],
        json!([
            "-p",
            port.to_string(),
            "-C",
            "$SECRET:snmp-community$",
            "--interface",
            "lo"
        ])
    );
    assert!(lo["id"].is_null(), "listed only: {lo}");
    let made = json(
        interfaces(json!({"args": agent_args, "create": true, "interval": 1}))
            .await
            .unwrap(),
        200,
    )
    .await;
    let count = made["interfaces"].as_array().unwrap().len();
    assert!(
        made["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"].is_string()),
        "{made}"
    );
    let again = json(
        interfaces(json!({"args": agent_args, "create": true}))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(
        again["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["error"].is_string() && i["id"].is_null()),
        "made once: {again}"
    );
    let services = get(s, t, "/api/v1/services?limit=100").await;
    assert_eq!(services["items"].as_array().unwrap().len(), count + 2);
    let begun = Instant::now();
    loop {
        let list = get(s, t, "/api/v1/services?limit=100").await;
        let state = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "if lo")
            .unwrap()["state"]
            .clone();
        if state["state"] == 0 {
            assert!(
                state["output"]
                    .as_str()
                    .unwrap()
                    .starts_with("SNMP OK - lo is up"),
                "{state}"
            );
            break;
        }
        assert!(begun.elapsed() < Duration::from_secs(30), "{state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let refused = interfaces(json!({"args": ["-p", port.to_string(), "-P", "3", "-U", "ada", "-A", "$SECRET:snmp-priv$", "-X", "$SECRET:snmp-priv$"]}))
        .await
        .unwrap();
    let problem = assert_problem(refused, 502, "svc:checks/failed").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("refused the v3 credentials"),
        "{problem}"
    );
    assert!(!problem.to_string().contains("priv-pass-1"), "{problem}");
    let service = call(
        s,
        t,
        Method::POST,
        &format!("/api/v1/hosts/{id}/snmp-interfaces"),
    )
    .json(&json!({"args": agent_args}))
    .send()
    .await
    .unwrap();
    assert_problem(service, 404, "svc:not-found").await;
    let (viewer, _) = mint(s, t, json!({"name": "v", "roles": ["viewer"]})).await;
    let forbidden = call(
        s,
        &viewer,
        Method::POST,
        &format!("/api/v1/hosts/{ups}/snmp-interfaces"),
    )
    .json(&json!({"args": agent_args}))
    .send()
    .await
    .unwrap();
    assert_problem(forbidden, 403, "svc:auth/forbidden").await;

    let started = Instant::now();
    loop {
        let series = get(s, t, &format!("/api/v1/objects/{id}/metrics")).await;
        let text = series.to_string();
        if text.contains("\"uptime\"") && text.contains("\"interfaces\"") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no series: {series}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A discovery scan finds the agent on SNMP's port (UDP 161, on a loopback address of its own):
/// with the community given, it suggests a check of the agent and one per interface, and the
/// community is neither stored nor shown; without it, the agent's answer to an SNMPv3 engine
/// discovery still finds it, with a v3 check to fill in.
#[tokio::test]
async fn discovery_offers_snmp_checks_for_an_agent_on_161() {
    // Port 161 is privileged: where the tests do not run as root there is no agent to find.
    if let Err(e) = std::net::UdpSocket::bind("127.0.0.74:161") {
        eprintln!("SKIPPED: no agent on 127.0.0.74:161 ({e})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(_agent) = agent_at(dir.path(), "127.0.0.74:161") else {
        return;
    };
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let scan = |body: Value| async move {
        let started = json(
            call(s, t, Method::POST, "/api/v1/discovery/scans")
                .json(&body)
                .send()
                .await
                .unwrap(),
            202,
        )
        .await;
        let id = started["id"].as_str().unwrap().to_string();
        let begun = Instant::now();
        loop {
            let v = get(s, t, &format!("/api/v1/discovery/scans/{id}")).await;
            if v["status"] == "done" {
                return v;
            }
            assert!(begun.elapsed() < Duration::from_secs(30), "{v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // snmpd takes a moment to listen, and a probe has a second on a loaded machine: scan
    // until it is found.
    let found_by = |body: Value| async move {
        let begun = Instant::now();
        loop {
            let v = scan(body.clone()).await;
            if !v["found"].as_array().unwrap().is_empty()
                || begun.elapsed() > Duration::from_secs(30)
            {
                return v;
            }
        }
    };
    let found =
        found_by(json!({"cidr": "127.0.0.74/32", "ports": [161], "snmpCommunity": COMMUNITY}))
            .await;
    assert_eq!(found["found"][0]["openPorts"], json!([161]), "{found}");
    let suggest: Vec<&str> = found["found"][0]["suggest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        suggest.contains(&"snmp -C $SECRET:snmp-community$ -o sysUpTime.0"),
        "{suggest:?}"
    );
    assert!(
        suggest.contains(&"snmp -C $SECRET:snmp-community$ --interface lo"),
        "{suggest:?}"
    );
    let listed = get(s, t, "/api/v1/discovery/scans").await;
    assert!(!listed.to_string().contains(COMMUNITY), "{listed}");
    assert!(!found.to_string().contains(COMMUNITY), "{found}");

    let v3 = found_by(json!({"cidr": "127.0.0.74/32", "ports": [161]})).await;
    assert_eq!(
        v3["found"][0]["suggest"],
        json!([
            "ping",
            "snmp -P 3 -U USER -A $SECRET:snmp-auth$ -X $SECRET:snmp-priv$ -o sysUpTime.0"
        ]),
        "public is not the community: {v3}"
    );
}
