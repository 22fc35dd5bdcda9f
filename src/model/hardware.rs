//! Local paging hardware as configured: serial line settings and modem families. Pure data,
//! shared by the configuration check and the drivers.

use serde::Serialize;

/// Character framing and speed of a line (`8N1`, `7E1`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSettings {
    pub baud: u32,
    pub data_bits: u8,
    /// `N`, `E` or `O`.
    pub parity: char,
    pub stop_bits: u8,
}

impl LineSettings {
    pub fn new(baud: u32, framing: &str) -> Result<Self, String> {
        let b = framing.as_bytes();
        let ok = b.len() == 3
            && matches!(b[0], b'7' | b'8')
            && matches!(b[1].to_ascii_uppercase(), b'N' | b'E' | b'O')
            && matches!(b[2], b'1' | b'2');
        if !ok || baud == 0 {
            return Err(format!(
                "line settings {baud} {framing:?}: want a positive baud rate and framing like 8N1 or 7E1"
            ));
        }
        Ok(Self {
            baud,
            data_bits: b[0] - b'0',
            parity: char::from(b[1].to_ascii_uppercase()),
            stop_bits: b[2] - b'0',
        })
    }
}

/// Modem families: they differ only in text-to-speech and key detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// No speech; key presses as `+DTMF: <digit>`.
    Generic,
    /// SIMCom (SIM800, SIM7600): `+CTTS`, `+DDET` and `+DTMF: <digit>`.
    Simcom,
    /// Quectel (EC25, UC15, M95): `+QTTS`, `+QTONEDET` reporting the digit's ASCII code.
    Quectel,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "" | "generic" => Ok(Profile::Generic),
            "simcom" => Ok(Profile::Simcom),
            "quectel" => Ok(Profile::Quectel),
            other => Err(format!(
                "modem profile {other:?}: want generic, simcom or quectel"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_is_read_from_its_short_form() {
        let s = LineSettings::new(9600, "7e1").unwrap();
        assert_eq!((s.data_bits, s.parity, s.stop_bits), (7, 'E', 1));
        assert!(LineSettings::new(9600, "9N1").is_err());
        assert!(LineSettings::new(0, "8N1").is_err());
        assert_eq!("Quectel".parse::<Profile>().unwrap(), Profile::Quectel);
        assert!("nokia".parse::<Profile>().is_err());
    }
}
