//! The LDAP directory against Debian's slapd, started by the test from a temporary
//! configuration (the `memberof` overlay keeps people's `memberOf`), filled over LDAP.

use crate::support::*;
use ldap3::{Ldap, LdapConnAsync, Mod};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};

const SUFFIX: &str = "dc=example,dc=org";
const ROOT: &str = "cn=admin,dc=example,dc=org";
const ROOT_PASSWORD: &str = "slapd-admin-password";

struct Slapd {
    _child: Peer,
    port: u16,
    tls_port: u16,
}

/// Starts slapd on two free ports (plain with StartTLS, and LDAPS) with a certificate of a
/// private CA, or `None` (a skip; a failure in CI) when it is not installed.
fn slapd(dir: &Path) -> Option<Slapd> {
    let bin = Path::new("/usr/sbin/slapd");
    if !bin.exists() {
        peer_missing("slapd");
        return None;
    }
    let (ca, cert, key) = private_ca(dir);
    std::fs::create_dir_all(dir.join("db")).unwrap();
    let conf = dir.join("slapd.conf");
    std::fs::write(
        &conf,
        format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include /etc/ldap/schema/inetorgperson.schema\n\
             modulepath /usr/lib/ldap\n\
             moduleload back_mdb\n\
             moduleload memberof\n\
             pidfile {dir}/slapd.pid\n\
             TLSCACertificateFile {ca}\n\
             TLSCertificateFile {cert}\n\
             TLSCertificateKeyFile {key}\n\
             database mdb\n\
             maxsize 16777216\n\
             suffix \"{SUFFIX}\"\n\
             rootdn \"{ROOT}\"\n\
             rootpw {ROOT_PASSWORD}\n\
             directory {dir}/db\n\
             overlay memberof\n",
            dir = dir.display(),
            ca = ca.display(),
            cert = cert.display(),
            key = key.display(),
        ),
    )
    .unwrap();
    let (port, tls_port) = (free_port(), free_port());
    let child = Command::new(bin)
        .arg("-f")
        .arg(&conf)
        .arg("-h")
        .arg(format!(
            "ldap://127.0.0.1:{port}/ ldaps://127.0.0.1:{tls_port}/"
        ))
        .args(["-d", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut slapd = Slapd {
        _child: Peer(child),
        port,
        tls_port,
    };
    slapd._child.wait_listening(port, "slapd");
    Some(slapd)
}

async fn admin(port: u16) -> Ldap {
    let (conn, mut ldap) = LdapConnAsync::new(&format!("ldap://127.0.0.1:{port}"))
        .await
        .unwrap();
    ldap3::drive!(conn);
    ldap.simple_bind(ROOT, ROOT_PASSWORD)
        .await
        .unwrap()
        .success()
        .unwrap();
    ldap
}

fn set(values: &[&str]) -> HashSet<String> {
    values.iter().map(|v| v.to_string()).collect()
}

async fn add(ldap: &mut Ldap, dn: &str, attrs: Vec<(&str, Vec<&str>)>) {
    let attrs: Vec<(String, HashSet<String>)> = attrs
        .into_iter()
        .map(|(a, v)| (a.to_string(), set(&v)))
        .collect();
    ldap.add(dn, attrs).await.unwrap().success().unwrap();
}

fn person_dn(uid: &str) -> String {
    format!("uid={uid},ou=people,{SUFFIX}")
}

fn group_dn(cn: &str) -> String {
    format!("cn={cn},ou=groups,{SUFFIX}")
}

async fn add_person(ldap: &mut Ldap, uid: &str, name: &str, mail: Option<&str>) {
    let dn = person_dn(uid);
    let mut attrs = vec![
        ("objectClass", vec!["inetOrgPerson"]),
        ("uid", vec![uid]),
        ("cn", vec![name]),
        ("sn", vec![name]),
        ("userPassword", vec!["directory-password"]),
    ];
    if let Some(m) = mail {
        attrs.push(("mail", vec![m]));
    }
    add(ldap, &dn, attrs).await;
}

async fn add_group(ldap: &mut Ldap, cn: &str, member: &str) {
    let attrs = vec![
        ("objectClass", vec!["groupOfNames"]),
        ("cn", vec![cn]),
        ("member", vec![member]),
    ];
    add(ldap, &group_dn(cn), attrs).await;
}

/// The directory: four people (dave without e-mail), the groups NOC and svc-admins.
async fn fill(port: u16) {
    let mut ldap = admin(port).await;
    add(
        &mut ldap,
        SUFFIX,
        vec![
            ("objectClass", vec!["dcObject", "organization"]),
            ("dc", vec!["example"]),
            ("o", vec!["Example"]),
        ],
    )
    .await;
    for ou in ["people", "groups"] {
        add(
            &mut ldap,
            &format!("ou={ou},{SUFFIX}"),
            vec![
                ("objectClass", vec!["organizationalUnit"]),
                ("ou", vec![ou]),
            ],
        )
        .await;
    }
    add_person(&mut ldap, "alice", "Alice Field", Some("Alice@Example.org")).await;
    add_person(&mut ldap, "bob", "Bob Boss", Some("bob@example.org")).await;
    add_person(&mut ldap, "carol", "Carol", Some("carol@example.org")).await;
    add_person(&mut ldap, "dave", "Dave", None).await;
    add_group(&mut ldap, "NOC", &person_dn("alice")).await;
    add_group(&mut ldap, "svc-admins", &person_dn("bob")).await;
    let _ = ldap.unbind().await;
}

fn ldap_config(url: &str, extra: &str) -> String {
    format!(
        "ldap:\n  url: {url}\n  bindDn: {ROOT}\n  bindPassword: {ROOT_PASSWORD}\n  baseDn: {SUFFIX}\n  adminGroup: cn=svc-admins,ou=groups,{SUFFIX}\n  syncInterval: 1h\n{extra}"
    )
}

async fn users_by_email(s: &Server, token: &str) -> std::collections::BTreeMap<String, Value> {
    let users = get(s, token, "/api/v1/users").await;
    users["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["email"].as_str().unwrap().to_string(), u.clone()))
        .collect()
}

/// `POST /api/v1/directory:sync`, expected to succeed: its result.
async fn sync_now(s: &Server, token: &str) -> Value {
    let res = call(s, token, Method::POST, "/api/v1/directory:sync");
    json(res.send().await.unwrap(), 200).await
}

#[tokio::test]
async fn directory_sync_provisions_maps_groups_and_disables_the_gone() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ldap) = slapd(dir.path()) else {
        return;
    };
    fill(ldap.port).await;
    let a = Admin::start_with(Opts {
        args: config_args(
            dir.path(),
            &ldap_config(&format!("ldap://127.0.0.1:{}", ldap.port), ""),
        ),
        ..Default::default()
    });
    let s = &a.s;
    // The sync worker's first run, at boot, provisions the directory's people.
    let mut waited = 0;
    while !users_by_email(s, &a.token)
        .await
        .contains_key("alice@example.org")
    {
        assert!(waited < 100, "no sync at boot");
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        users_by_email(s, &a.token).await["alice@example.org"]["roles"],
        json!(["viewer"])
    );
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/roles",
        json!({"name": "noc", "permissions": ["objects:read", "alerts:ack"], "idpGroups": ["noc"]}),
    )
    .await;
    assert_eq!(res.status(), 201);

    // A sync now: the role came after the boot's sync.
    let result = sync_now(s, &a.token).await;
    assert_eq!(
        result["skipped"], 0,
        "the default filter wants a mail: {result}"
    );
    let users = users_by_email(s, &a.token).await;
    let alice = &users["alice@example.org"];
    assert_eq!(
        alice["roles"],
        json!(["noc"]),
        "NOC's first RDN matches idpGroups noc, lower-cased: {alice}"
    );
    assert_eq!(alice["local"], false);
    assert_eq!(alice["name"], "Alice Field");
    assert_eq!(alice["subject"], format!("ldap|{}", person_dn("alice")));
    assert_eq!(
        users["bob@example.org"]["roles"],
        json!(["admin"]),
        "the admin group"
    );
    assert_eq!(
        users["carol@example.org"]["roles"],
        json!(["viewer"]),
        "default roles"
    );
    assert!(!users.keys().any(|e| e.contains("dave")));

    // Nothing changed since: nothing is written, and the status says so.
    let again = sync_now(s, &a.token).await;
    assert_eq!(
        (
            again["created"].as_u64(),
            again["updated"].as_u64(),
            again["disabled"].as_u64(),
            again["unchanged"].as_u64()
        ),
        (Some(0), Some(0), Some(0), Some(3)),
        "{again}"
    );
    let status = get(s, &a.token, "/api/v1/directory/status").await;
    assert_eq!(status["configured"], true);
    assert_eq!(status["url"], format!("ldap://127.0.0.1:{}", ldap.port));
    assert_eq!(status["syncInterval"], "1h0m0s");
    assert_eq!(status["lastResult"], again);
    assert!(
        status["lastSyncAt"].is_string() && status.get("lastError").is_none(),
        "{status}"
    );

    // Directory people sign in with their directory password (search, then bind).
    let res = login(s, "alice@example.org", "directory-password", false).await;
    assert_eq!(res.status(), 302);
    let (session, _) = session_of(&res);
    let me = json(whoami_cookie(s, &session).await, 200).await;
    assert!(
        me["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("alerts:ack")),
        "{me}"
    );
    assert_eq!(
        login(s, "alice@example.org", "wrong", false).await.status(),
        401
    );
    assert_eq!(
        login(s, "alice@example.org", "", false).await.status(),
        401,
        "an empty password is no anonymous bind"
    );

    // Carol leaves, alice moves to the admins: the next sync disables and promotes.
    let mut root = admin(ldap.port).await;
    root.delete(&person_dn("carol"))
        .await
        .unwrap()
        .success()
        .unwrap();
    let (alice_dn, dave_dn) = (person_dn("alice"), person_dn("dave"));
    // A group of names keeps at least one member: dave, whom the filter leaves out.
    root.modify(
        &group_dn("NOC"),
        vec![
            Mod::Add("member", HashSet::from([dave_dn.as_str()])),
            Mod::Delete("member", HashSet::from([alice_dn.as_str()])),
        ],
    )
    .await
    .unwrap()
    .success()
    .unwrap_or_else(|e| panic!("{e}"));
    root.modify(
        &group_dn("svc-admins"),
        vec![Mod::Add("member", HashSet::from([alice_dn.as_str()]))],
    )
    .await
    .unwrap()
    .success()
    .unwrap();
    let result = sync_now(s, &a.token).await;
    assert_eq!(
        (result["updated"].as_u64(), result["disabled"].as_u64()),
        (Some(1), Some(1)),
        "{result}"
    );
    let users = users_by_email(s, &a.token).await;
    assert_eq!(users["carol@example.org"]["disabled"], true);
    assert_eq!(users["alice@example.org"]["roles"], json!(["admin"]));
    assert_eq!(
        login(s, "carol@example.org", "directory-password", false)
            .await
            .status(),
        401
    );
    assert_eq!(users["carol@example.org"]["disabledByDirectory"], true);

    // Carol comes back: the sync that finds her enables the account it had disabled.
    add_person(&mut root, "carol", "Carol", Some("carol@example.org")).await;
    let result = sync_now(s, &a.token).await;
    assert_eq!(result["updated"].as_u64(), Some(1), "{result}");
    let users = users_by_email(s, &a.token).await;
    assert_eq!(users["carol@example.org"]["disabled"], false);
    assert!(
        users["carol@example.org"]
            .get("disabledByDirectory")
            .is_none()
    );
    assert_eq!(
        login(s, "carol@example.org", "directory-password", false)
            .await
            .status(),
        302
    );

    // Audited and journaled.
    let actions = audit_actions(s, &a.token, 200).await;
    for action in [
        "directory.sync",
        "user.provision",
        "user.update",
        "user.disable",
        "login.ldap",
    ] {
        assert!(
            actions.iter().any(|a| a == action),
            "{action} in {actions:?}"
        );
    }
    let events = get(s, &a.token, "/api/v1/events?types=config&limit=50").await;
    assert!(
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["payload"]["action"] == "directory.sync"),
        "{events}"
    );

    // The directory is the default tenant's: another tenant's administrator cannot reach it.
    let (_, other) = second_tenant(s, &a.token, "branch").await;
    for (method, path) in [
        (Method::GET, "/api/v1/directory/status"),
        (Method::POST, "/api/v1/directory:sync"),
    ] {
        let res = call(s, &other, method, path).send().await.unwrap();
        assert_problem(res, 403, "svc:auth/forbidden").await;
    }
}

#[tokio::test]
async fn directory_over_tls_and_its_failures() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ldap) = slapd(dir.path()) else {
        return;
    };
    fill(ldap.port).await;
    let start = |url: String, extra: &str, sub: &str| {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        Admin::start_with(Opts {
            args: config_args(&d, &ldap_config(&url, extra)),
            ..Default::default()
        })
    };
    let sync = |a: &Admin| call(&a.s, &a.token, Method::POST, "/api/v1/directory:sync").send();

    // StartTLS and LDAPS against a private CA: refused unless insecureSkipVerify says otherwise.
    let starttls = start(
        format!("ldap://127.0.0.1:{}", ldap.port),
        "  startTls: true\n",
        "a",
    );
    let p = assert_problem(sync(&starttls).await.unwrap(), 502, "svc:directory/sync").await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("certificate"),
        "{p}"
    );
    let status = get(&starttls.s, &starttls.token, "/api/v1/directory/status").await;
    assert!(
        status["lastError"]
            .as_str()
            .is_some_and(|e| e.to_lowercase().contains("certificate")),
        "{status}"
    );
    let users = users_by_email(&starttls.s, &starttls.token).await;
    assert!(
        !users.contains_key("alice@example.org"),
        "a failed sync changes nothing"
    );
    drop(starttls);
    for (url, extra, sub) in [
        (
            format!("ldap://127.0.0.1:{}", ldap.port),
            "  startTls: true\n  insecureSkipVerify: true\n  userFilter: (objectClass=inetOrgPerson)\n",
            "b",
        ),
        (
            format!("ldaps://127.0.0.1:{}", ldap.tls_port),
            "  insecureSkipVerify: true\n",
            "c",
        ),
    ] {
        let a = start(url.clone(), extra, sub);
        let result = json(sync(&a).await.unwrap(), 200).await;
        let users = users_by_email(&a.s, &a.token).await;
        assert!(users.contains_key("alice@example.org"), "{url}: {result}");
        let without_mail = if extra.contains("userFilter") { 1 } else { 0 };
        assert_eq!(
            result["skipped"], without_mail,
            "dave has no e-mail: {result}"
        );
        assert_eq!(
            login(&a.s, "bob@example.org", "directory-password", false)
                .await
                .status(),
            302,
            "{url}"
        );
    }

    // Groups found by a search instead of memberOf, the subject from uid, the admin group by CN.
    let d = dir.path().join("g");
    std::fs::create_dir_all(&d).unwrap();
    let yaml = ldap_config(
        &format!("ldap://127.0.0.1:{}", ldap.port),
        &format!("  groupAttr: description\n  groupFilter: (&(objectClass=groupOfNames)(member={{dn}}))\n  groupBaseDn: ou=groups,{SUFFIX}\n  idAttr: uid\n"),
    )
    .replace(&format!("adminGroup: cn=svc-admins,ou=groups,{SUFFIX}"), "adminGroup: SVC-Admins");
    let a = Admin::start_with(Opts {
        args: config_args(&d, &yaml),
        ..Default::default()
    });
    json(sync(&a).await.unwrap(), 200).await;
    let users = users_by_email(&a.s, &a.token).await;
    assert_eq!(
        users["bob@example.org"]["roles"],
        json!(["admin"]),
        "{users:?}"
    );
    assert_eq!(users["alice@example.org"]["roles"], json!(["viewer"]));
    assert_eq!(users["alice@example.org"]["subject"], "ldap|alice");

    // A wrong bind password, and a directory that is not there.
    let d = dir.path().join("e");
    std::fs::create_dir_all(&d).unwrap();
    let yaml = ldap_config(&format!("ldap://127.0.0.1:{}", ldap.port), "")
        .replace(ROOT_PASSWORD, "not-the-password");
    let a = Admin::start_with(Opts {
        args: config_args(&d, &yaml),
        ..Default::default()
    });
    let p = assert_problem(sync(&a).await.unwrap(), 502, "svc:directory/sync").await;
    assert!(p["detail"].as_str().unwrap().contains("binding as"), "{p}");
    assert!(
        !p.to_string().contains("not-the-password"),
        "no secret in the problem: {p}"
    );
    let gone = start(format!("ldap://127.0.0.1:{}", free_port()), "", "f");
    let p = assert_problem(sync(&gone).await.unwrap(), 502, "svc:directory/sync").await;
    assert!(
        p["detail"].as_str().unwrap().contains("connecting to"),
        "{p}"
    );
}

#[tokio::test]
async fn directory_routes_answer_501_until_ldap_is_configured() {
    let a = Admin::start();
    for (method, path) in [
        (Method::GET, "/api/v1/directory/status"),
        (Method::POST, "/api/v1/directory:sync"),
    ] {
        let res = call(&a.s, &a.token, method, path).send().await.unwrap();
        assert_problem(res, 501, "svc:directory/unconfigured").await;
    }
}
