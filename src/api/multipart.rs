//! `multipart/form-data` (RFC 7578) as a browser sends a form with a file: each part's name,
//! file name, type and bytes. The body is already in memory within the request body limit.

/// One field of the form.
#[derive(Debug, PartialEq)]
pub struct Part {
    pub name: String,
    /// Set for a file input (empty when no file was chosen).
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

/// The parts of `body`, sent with `content_type` (`multipart/form-data; boundary=...`).
pub fn parse(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let (media, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    if !media.trim().eq_ignore_ascii_case("multipart/form-data") {
        return Err("expected a multipart/form-data body".into());
    }
    let boundary = params
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"'))
        .filter(|b| (1..=70).contains(&b.len()))
        .ok_or("the multipart body has no boundary of 1 to 70 characters")?;
    let delimiter = format!("--{boundary}");
    let close = format!("\r\n{delimiter}");
    let mut at = if body.starts_with(delimiter.as_bytes()) {
        0
    } else {
        find(body, close.as_bytes(), 0).ok_or("the multipart body has no parts")? + 2
    };
    let mut parts = Vec::new();
    loop {
        at += delimiter.len();
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        // Transport padding may follow a delimiter before its line ends (RFC 2046 5.1.1).
        let line_end = find(body, b"\r\n", at).ok_or("a multipart delimiter line does not end")?;
        let headers_start = line_end + 2;
        let (headers, data_start) = if body[headers_start..].starts_with(b"\r\n") {
            ("", headers_start + 2)
        } else {
            let headers_end =
                find(body, b"\r\n\r\n", headers_start).ok_or("a part's headers do not end")?;
            let headers = std::str::from_utf8(&body[headers_start..headers_end])
                .map_err(|_| "a part's headers are not UTF-8")?;
            (headers, headers_end + 4)
        };
        let end = find(body, close.as_bytes(), data_start).ok_or("a part does not end")?;
        parts.push(part(headers, body[data_start..end].to_vec())?);
        at = end + 2;
    }
}

fn part(headers: &str, data: Vec<u8>) -> Result<Part, String> {
    let mut part = Part {
        name: String::new(),
        filename: None,
        content_type: None,
        data,
    };
    let mut named = false;
    for line in headers.split("\r\n").filter(|l| !l.is_empty()) {
        let (header, value) = line
            .split_once(':')
            .ok_or_else(|| format!("a part's header {line:?} has no colon"))?;
        match header.trim().to_ascii_lowercase().as_str() {
            "content-disposition" => {
                for param in value.split(';').skip(1) {
                    let Some((key, v)) = param.trim().split_once('=') else {
                        continue;
                    };
                    let v = v.trim().trim_matches('"').to_string();
                    match key.trim().to_ascii_lowercase().as_str() {
                        "name" => {
                            part.name = v;
                            named = true;
                        }
                        "filename" => part.filename = Some(v),
                        _ => {}
                    }
                }
            }
            "content-type" => part.content_type = Some(value.trim().to_string()),
            _ => {}
        }
    }
    if !named {
        return Err("a part has no name in its Content-Disposition".into());
    }
    Ok(part)
}

/// Where `needle` first occurs in `haystack` at or after `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE: &str = "multipart/form-data; boundary=----form7";

    #[test]
    fn reads_fields_and_a_file_as_a_browser_sends_them() {
        let body = b"------form7\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nLeitstelle Nord\r\n------form7\r\nContent-Disposition: form-data; name=\"logo\"; filename=\"logo.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n\x1a\n\r\n--x\r\n------form7\r\nContent-Disposition: form-data; name=\"empty\"; filename=\"\"\r\nContent-Type: application/octet-stream\r\n\r\n\r\n------form7--\r\n";
        let parts = parse(TYPE, body).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].name, "name");
        assert_eq!(parts[0].data, b"Leitstelle Nord");
        assert_eq!(parts[0].filename, None);
        assert_eq!(parts[1].filename.as_deref(), Some("logo.png"));
        assert_eq!(parts[1].content_type.as_deref(), Some("image/png"));
        assert_eq!(
            parts[1].data, b"\x89PNG\r\n\x1a\n\r\n--x",
            "a CRLF and dashes inside the file are data"
        );
        assert_eq!(parts[2].filename.as_deref(), Some(""));
        assert!(parts[2].data.is_empty());
    }

    #[test]
    fn a_quoted_boundary_a_preamble_and_no_parts() {
        let body = b"preamble\r\n--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--";
        let parts = parse("multipart/form-data; boundary=\"b\"", body).unwrap();
        assert_eq!(parts[0].name, "a");
        assert_eq!(parts[0].data, b"1");
        assert_eq!(parse(TYPE, b"------form7--\r\n").unwrap(), vec![]);
    }

    #[test]
    fn refuses_what_is_not_a_whole_form() {
        for (content_type, body) in [
            ("application/x-www-form-urlencoded", &b"a=1"[..]),
            ("multipart/form-data", b"--x\r\n"),
            (TYPE, b"no delimiter at all"),
            (
                TYPE,
                b"------form7\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunfinished",
            ),
            (
                TYPE,
                b"------form7\r\nContent-Disposition: form-data\r\n\r\nx\r\n------form7--",
            ),
            (TYPE, b"------form7\r\nno colon\r\n\r\nx\r\n------form7--"),
            (TYPE, b"------form7\r\n\r\nx\r\n------form7--"),
            (TYPE, b"------form7"),
        ] {
            assert!(
                parse(content_type, body).is_err(),
                "{content_type} {body:?}"
            );
        }
    }
}
