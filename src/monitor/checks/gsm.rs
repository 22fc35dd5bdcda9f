//! `gsm`: the local GSM modem's health as a service state, so a dead modem, a locked SIM, a
//! lost registration or a weak signal alerts like any service. `-w`/`-c` are signal floors in
//! dBm (default -95 and -105): below the floor is WARNING or CRITICAL.

use super::{Builtin, Outcome, status_word};

pub(super) fn check(ctx: &Builtin<'_>) -> Outcome {
    let Some(modem) = &ctx.devices.modem else {
        return Outcome::unknown("GSM", "no GSM modem is configured (hardware.gsm)");
    };
    let (warn, crit) = match (
        ctx.number(&["-w", "--warning"], -95),
        ctx.number(&["-c", "--critical"], -105),
    ) {
        (Ok(w), Ok(c)) => (w, c),
        (Err(e), _) | (_, Err(e)) => return Outcome::unknown("GSM", e),
    };
    let s = modem.status();
    if !s.connected {
        let why = s.last_error.unwrap_or_else(|| "modem not answering".into());
        return Outcome::new(2, format!("GSM CRITICAL - {why}"));
    }
    if s.sim != "ready" {
        return Outcome::new(2, format!("GSM CRITICAL - SIM {}", s.sim));
    }
    if !s.registered() {
        return Outcome::new(
            2,
            format!("GSM CRITICAL - not registered ({})", s.registration),
        );
    }
    let Some(dbm) = s.signal_dbm else {
        return Outcome::new(
            1,
            format!(
                "GSM WARNING - registered {}, signal unknown",
                s.registration
            ),
        );
    };
    let code = if dbm < crit {
        2
    } else if dbm < warn {
        1
    } else {
        0
    };
    Outcome::new(
        code,
        format!(
            "GSM {} - registered {}, signal {dbm} dBm, {} sent, {} received | signal={dbm}dBm;{warn};{crit}",
            status_word(code),
            s.registration,
            s.sms_sent,
            s.sms_received,
        ),
    )
}
