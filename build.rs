//! Records the rustc version for `/api/v1/system/info`, and gzips the committed OpenAPI
//! document (`docs/openapi.json`, kept current by `api::openapi`'s tests) with this build's
//! version for `GET /api/openapi.json`.
use std::io::Write;

/// `info.version` of the committed document: `model::DEV_VERSION`.
const DEV_VERSION: &str = "\"version\": \"0.1.0-dev\"";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SVC_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=SVC_VERSION");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=docs/openapi.json");

    let mut document = std::fs::read_to_string("docs/openapi.json")?;
    if let Ok(v) = std::env::var("SVC_VERSION") {
        let quoted = json_string(&v);
        document = document.replacen(DEV_VERSION, &format!("\"version\": {quoted}"), 1);
    }
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(document.as_bytes())?;
    let out = std::path::Path::new(&std::env::var("OUT_DIR")?).join("openapi.json.gz");
    std::fs::write(out, z.finish()?)?;
    Ok(())
}

/// `v` as a JSON string.
fn json_string(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
