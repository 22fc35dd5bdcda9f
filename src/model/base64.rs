//! Base64 (RFC 4648): what clients send encoded, a file a form uploaded kept as a `data:`
//! URI, and the URL-safe form of Web Push keys and tokens (section 5).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const URL_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encodes with padding.
pub fn encode(bytes: &[u8]) -> String {
    encode_with(bytes, ALPHABET, true)
}

/// Encodes with the URL-safe alphabet and without padding (JWTs, Web Push keys).
pub fn encode_url(bytes: &[u8]) -> String {
    encode_with(bytes, URL_ALPHABET, false)
}

/// Encodes with the URL-safe alphabet and padding (session ids, as SPEC 5.6 writes them).
pub fn encode_url_padded(bytes: &[u8]) -> String {
    encode_with(bytes, URL_ALPHABET, true)
}

fn encode_with(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes base64, standard or URL-safe, padded or not (`Authorization: Basic`, a
/// dashboard's layout, a browser's push keys); `None` for a character outside the alphabets.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        acc = (acc << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_padded_and_unpadded_and_refuses_other_characters() {
        assert_eq!(decode("dXNlcjpwYXNz").unwrap_or_default(), b"user:pass");
        assert_eq!(decode("YQ==").unwrap_or_default(), b"a");
        assert_eq!(decode("YQ").unwrap_or_default(), b"a");
        assert!(decode("@@").is_none());
    }

    #[test]
    fn encodes_what_decodes_back() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"a"), "YQ==");
        assert_eq!(encode(b"ab"), "YWI=");
        assert_eq!(encode(b"user:pass"), "dXNlcjpwYXNz");
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap_or_default(), all);
        assert_eq!(decode(&encode_url(&all)).unwrap_or_default(), all);
        assert_eq!(encode_url(&[0xfb, 0xff]), "-_8");
        assert_eq!(encode_url_padded(&[0xfb, 0xff]), "-_8=");
    }
}
