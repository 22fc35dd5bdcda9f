//! The UI's static files, compiled into the binary from `web/`: each served under a name that
//! carries a hash of its content (`/assets/app.3f2a9c1b.css`), so a page always names the
//! version it was rendered with and browsers may keep it for a year (`immutable`), and gzipped
//! once at start for clients that accept it.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::LazyLock;

/// One embedded file.
pub struct Asset {
    /// The name a page links to: stem, content hash, extension.
    pub path: String,
    pub media: &'static str,
    pub bytes: &'static [u8],
    /// The same bytes gzipped, when that is smaller.
    pub gzipped: Option<Vec<u8>>,
}

/// The files of `web/`, by their plain name.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../web/app.css"),
    ),
    (
        "live.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/live.js"),
    ),
    (
        "push.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/push.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_bytes!("../../web/favicon.svg"),
    ),
    (
        "sw.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/sw.js"),
    ),
];

static ASSETS: LazyLock<Vec<(&'static str, Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(name, media, bytes)| {
            let hash = Sha256::digest(bytes);
            let short: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
            let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
            let asset = Asset {
                path: format!("/assets/{stem}.{short}.{ext}"),
                media,
                bytes,
                gzipped: gzip(bytes).filter(|z| z.len() < bytes.len()),
            };
            (*name, asset)
        })
        .collect()
});

fn gzip(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(bytes).ok()?;
    z.finish().ok()
}

/// The URL of an embedded file by its plain name (`app.css`); `/assets/missing` for a name
/// `web/` does not hold, which a test catches.
pub fn url(name: &str) -> &'static str {
    ASSETS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("/assets/missing", |(_, a)| a.path.as_str())
}

/// An embedded file by its plain name, for the one served under it (the service worker,
/// whose address decides its scope).
pub fn by_name(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|(n, _)| *n == name).map(|(_, a)| a)
}

/// The file served at `path` (its hashed name).
pub fn by_path(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().map(|(_, a)| a).find(|a| a.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_a_hashed_name_and_a_smaller_gzip() {
        for (name, _, bytes) in FILES {
            let path = url(name);
            assert!(path.starts_with("/assets/"), "{path}");
            let asset = by_path(path).unwrap_or_else(|| panic!("{path} is served"));
            assert_eq!(asset.bytes, *bytes);
            // A file smaller than a packet gains nothing from gzip.
            if bytes.len() < 1024 {
                continue;
            }
            let z = asset
                .gzipped
                .as_ref()
                .unwrap_or_else(|| panic!("{name} gzipped"));
            assert!(
                z.len() < bytes.len() / 2,
                "{name}: {} of {}",
                z.len(),
                bytes.len()
            );
        }
        assert_eq!(url("nothing.css"), "/assets/missing");
        assert!(by_path("/assets/app.css").is_none(), "only hashed names");
    }
}
