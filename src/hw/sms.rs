//! Short messages on the air interface (3GPP TS 23.038, 23.040) and the modem's error codes
//! (TS 27.005 3.2.5): GSM 7-bit and UCS-2 text, SMS-SUBMIT PDUs with concatenation headers,
//! and whether a `+CMS ERROR` is worth another attempt.

/// The GSM 7-bit default alphabet by code.
const BASIC: [char; 128] = [
    '@', '£', '$', '¥', 'è', 'é', 'ù', 'ì', 'ò', 'Ç', '\n', 'Ø', 'ø', '\r', 'Å', 'å', //
    'Δ', '_', 'Φ', 'Γ', 'Λ', 'Ω', 'Π', 'Ψ', 'Σ', 'Θ', 'Ξ', '\u{1b}', 'Æ', 'æ', 'ß', 'É', //
    ' ', '!', '"', '#', '¤', '%', '&', '\'', '(', ')', '*', '+', ',', '-', '.', '/', //
    '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', ':', ';', '<', '=', '>', '?', //
    '¡', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', //
    'P', 'Q', 'R', 'S', 'T', 'U', 'V', 'W', 'X', 'Y', 'Z', 'Ä', 'Ö', 'Ñ', 'Ü', '§', //
    '¿', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', //
    'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z', 'ä', 'ö', 'ñ', 'ü', 'à', //
];

/// The extension table, reached through the escape code 0x1B.
const EXTENSION: [(char, u8); 10] = [
    ('\u{c}', 0x0A),
    ('^', 0x14),
    ('{', 0x28),
    ('}', 0x29),
    ('\\', 0x2F),
    ('[', 0x3C),
    ('~', 0x3D),
    (']', 0x3E),
    ('|', 0x40),
    ('€', 0x65),
];

/// Septets of one message part without and with a concatenation header.
const SEPTETS_SINGLE: usize = 160;
const SEPTETS_PART: usize = 153;
/// UCS-2 code units likewise.
const UNITS_SINGLE: usize = 70;
const UNITS_PART: usize = 67;

/// The septets of `text` in the GSM default alphabet, or `None` when a character has no code.
pub fn gsm7(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        if let Some(code) = BASIC.iter().position(|b| *b == c && c != '\u{1b}') {
            out.push(u8::try_from(code).ok()?);
        } else {
            let (_, code) = EXTENSION.iter().find(|(e, _)| *e == c)?;
            out.extend([0x1B, *code]);
        }
    }
    Some(out)
}

/// Whether text mode with the `GSM` character set carries `text` byte for byte: only
/// characters whose GSM code is their ASCII code (no `@`, `$`, `_` or brackets).
pub fn text_mode_safe(text: &str) -> bool {
    text.chars().all(|c| {
        c == '\n'
            || c == '\r'
            || (c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    ' ' | '!'
                        | '"'
                        | '#'
                        | '%'
                        | '&'
                        | '\''
                        | '('
                        | ')'
                        | '*'
                        | '+'
                        | ','
                        | '-'
                        | '.'
                        | '/'
                        | ':'
                        | ';'
                        | '<'
                        | '='
                        | '>'
                        | '?'
                ))
    })
}

/// Whether one text-mode message carries `text`: GSM (up to 160) when byte-safe, else UCS-2
/// (up to 70 code units).
pub fn fits_text_mode(text: &str) -> Option<Encoding> {
    if text_mode_safe(text) && text.len() <= SEPTETS_SINGLE {
        Some(Encoding::Gsm7)
    } else if text.encode_utf16().count() <= UNITS_SINGLE {
        Some(Encoding::Ucs2)
    } else {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Gsm7,
    Ucs2,
}

/// Upper-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// `text` as UCS-2 hex (text mode with `AT+CSCS="UCS2"`).
pub fn ucs2_hex(text: &str) -> String {
    text.encode_utf16().map(|u| format!("{u:04X}")).collect()
}

/// Text from UCS-2 hex, or `None` when it is not.
pub fn from_ucs2_hex(hex: &str) -> Option<String> {
    if hex.is_empty() || !hex.len().is_multiple_of(4) || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let units: Vec<u16> = (0..hex.len())
        .step_by(4)
        .map(|i| u16::from_str_radix(&hex[i..i + 4], 16).ok())
        .collect::<Option<_>>()?;
    String::from_utf16(&units).ok()
}

/// Packs septets into octets, starting `skip` bits into the user data (after a header).
fn pack(septets: &[u8], skip: usize, into: &mut Vec<u8>) {
    let bits = skip + septets.len() * 7;
    into.resize(bits.div_ceil(8), 0);
    for (i, s) in septets.iter().enumerate() {
        let at = skip + i * 7;
        let word = u16::from(*s & 0x7F) << (at % 8);
        into[at / 8] |= (word & 0xFF) as u8;
        if at / 8 + 1 < into.len() {
            into[at / 8 + 1] |= (word >> 8) as u8;
        }
    }
}

/// The destination address field: digit count, type (international with `+`), swapped BCD.
fn address(number: &str) -> Result<Vec<u8>, String> {
    let international = number.starts_with('+');
    let digits: Vec<u8> = number
        .chars()
        .filter(|c| !matches!(c, '+' | ' ' | '-' | '(' | ')'))
        .map(|c| {
            c.to_digit(10)
                .and_then(|d| u8::try_from(d).ok())
                .ok_or_else(|| {
                    format!("phone number {number:?} has a character that is not a digit")
                })
        })
        .collect::<Result<_, _>>()?;
    if digits.is_empty() || digits.len() > 20 {
        return Err(format!("phone number {number:?} must have 1 to 20 digits"));
    }
    let mut out = vec![
        u8::try_from(digits.len()).unwrap_or(20),
        if international { 0x91 } else { 0x81 },
    ];
    for pair in digits.chunks(2) {
        out.push(pair[0] | (pair.get(1).copied().unwrap_or(0x0F) << 4));
    }
    Ok(out)
}

/// One SMS-SUBMIT TPDU to send with `AT+CMGS=<octets>` in PDU mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdu {
    /// The TPDU's length in octets, not counting the empty service centre address.
    pub octets: usize,
    /// `00` (the modem's default service centre) and the TPDU, in hex.
    pub hex: String,
}

/// The SMS-SUBMIT PDUs of `text` to `number`: one, or a concatenated series (reference
/// `reference`) when it is too long for one; GSM 7-bit when every character has a code,
/// else UCS-2.
pub fn submit_pdus(number: &str, text: &str, reference: u8) -> Result<Vec<Pdu>, String> {
    let da = address(number)?;
    let (dcs, parts): (u8, Vec<Vec<u8>>) = match gsm7(text) {
        Some(septets) if septets.len() <= SEPTETS_SINGLE => (0x00, vec![septets]),
        Some(septets) => (0x00, split_septets(&septets)),
        None => {
            let units: Vec<u16> = text.encode_utf16().collect();
            let chunks = if units.len() <= UNITS_SINGLE {
                vec![units]
            } else {
                split_units(&units)
            };
            (
                0x08,
                chunks
                    .into_iter()
                    .map(|c| c.iter().flat_map(|u| u.to_be_bytes()).collect())
                    .collect(),
            )
        }
    };
    let total = parts.len();
    if total > 255 {
        return Err("message too long for a concatenated SMS".into());
    }
    let mut out = Vec::with_capacity(total);
    for (i, part) in parts.iter().enumerate() {
        let udh = (total > 1).then(|| {
            [
                0x05,
                0x00,
                0x03,
                reference,
                u8::try_from(total).unwrap_or(u8::MAX),
                u8::try_from(i + 1).unwrap_or(u8::MAX),
            ]
        });
        let mut tpdu = vec![if udh.is_some() { 0x41 } else { 0x01 }, 0x00];
        tpdu.extend(&da);
        tpdu.extend([0x00, dcs]);
        let mut ud = udh.map(|h| h.to_vec()).unwrap_or_default();
        let udl = if dcs == 0x00 {
            // The header is padded to a septet boundary; UDL counts septets.
            let header_septets = (ud.len() * 8).div_ceil(7);
            pack(part, header_septets * 7, &mut ud);
            header_septets + part.len()
        } else {
            ud.extend(part);
            ud.len()
        };
        tpdu.push(u8::try_from(udl).map_err(|_| "message part too long".to_string())?);
        tpdu.extend(ud);
        out.push(Pdu {
            octets: tpdu.len(),
            hex: format!("00{}", hex(&tpdu)),
        });
    }
    Ok(out)
}

/// Septets in parts of at most 153, never splitting an escape from its code.
fn split_septets(septets: &[u8]) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    let mut start = 0;
    while start < septets.len() {
        let mut end = (start + SEPTETS_PART).min(septets.len());
        if end < septets.len() && septets[end - 1] == 0x1B {
            end -= 1;
        }
        parts.push(septets[start..end].to_vec());
        start = end;
    }
    parts
}

/// UCS-2 units in parts of at most 67, never splitting a surrogate pair.
fn split_units(units: &[u16]) -> Vec<Vec<u16>> {
    let mut parts = Vec::new();
    let mut start = 0;
    while start < units.len() {
        let mut end = (start + UNITS_PART).min(units.len());
        if end < units.len() && (0xD800..0xDC00).contains(&units[end - 1]) {
            end -= 1;
        }
        parts.push(units[start..end].to_vec());
        start = end;
    }
    parts
}

/// Whether a `+CMS ERROR: <code>` may succeed later (network, service centre or modem
/// state) or never will for this message (number, subscription, format).
pub fn cms_retryable(code: u16) -> bool {
    match code {
        // RP causes (TS 24.011 E.2): unassigned number, barring, rejected, unknown or
        // unidentified subscriber, facility rejected or not subscribed, invalid message.
        1 | 8 | 10 | 21 | 28 | 29 | 30 | 50 | 69 | 95..=99 => false,
        0..=127 => true,
        // TP-FCS (TS 23.040 9.2.3.22): SC busy, SC system failure, SIM storage full, memory
        // exceeded and unspecified may pass; the rest concern this message.
        192 | 194 | 208 | 211 | 255 => true,
        128..=255 => false,
        // ME errors: operation not allowed or supported, invalid PDU or text parameter.
        302..=305 => false,
        _ => true,
    }
}

/// The same for a verbose (`AT+CMEE=2`) error text.
pub fn cms_text_retryable(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    ![
        "not allowed",
        "not supported",
        "invalid",
        "unassigned",
        "barred",
        "unknown subscriber",
    ]
    .iter()
    .any(|w| t.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm7_uses_the_extension_table_and_refuses_what_it_lacks() {
        assert_eq!(gsm7("A@€").unwrap(), vec![0x41, 0x00, 0x1B, 0x65]);
        assert!(gsm7("Ĳ").is_none());
        assert!(text_mode_safe("CRIT: disk full\nACK 1a2b3c4d"));
        assert!(
            !text_mode_safe("[CRIT]"),
            "brackets need the extension table"
        );
        assert!(!text_mode_safe("mail me@example"));
        assert_eq!(fits_text_mode("Grüße"), Some(Encoding::Ucs2));
        assert_eq!(fits_text_mode(&"x".repeat(161)), None);
    }

    #[test]
    fn a_short_gsm7_pdu_matches_the_textbook_example() {
        // "hellohello" to +12345 (TS 23.040 packing: E8329BFD4697D9EC37).
        let pdus = submit_pdus("+12345", "hellohello", 0).unwrap();
        assert_eq!(pdus.len(), 1);
        assert_eq!(pdus[0].hex, "00010005912143F500000AE8329BFD4697D9EC37");
        assert_eq!(pdus[0].octets, 19);
    }

    #[test]
    fn long_texts_are_concatenated_with_a_header() {
        let text = "x".repeat(200);
        let pdus = submit_pdus("0170", &text, 7).unwrap();
        assert_eq!(pdus.len(), 2);
        // First octet with UDHI, national number, header 05 00 03 07 02 01, UDL 7 + 153.
        assert!(pdus[0].hex.starts_with("004100048110070000A0050003070201"));
        assert!(pdus[1].hex.contains("050003070202"));
        let ucs = submit_pdus("+1", &"Ж".repeat(100), 1).unwrap();
        assert_eq!(ucs.len(), 2);
        assert!(ucs[0].hex.contains("0008"), "UCS-2 coding");
    }

    #[test]
    fn ucs2_hex_round_trips() {
        assert_eq!(ucs2_hex("Ä1"), "00C40031");
        assert_eq!(from_ucs2_hex("00C40031").unwrap(), "Ä1");
        assert!(from_ucs2_hex("hello").is_none());
    }

    #[test]
    fn cms_errors_split_into_retry_and_give_up() {
        assert!(cms_retryable(38), "network out of order");
        assert!(cms_retryable(42), "congestion");
        assert!(!cms_retryable(1), "unassigned number");
        assert!(!cms_retryable(304), "invalid PDU parameter");
        assert!(cms_retryable(331), "no network service");
        assert!(cms_text_retryable("Network out of order"));
        assert!(!cms_text_retryable("operation not allowed"));
    }
}
