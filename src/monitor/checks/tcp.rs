//! `tcp`: connects to `-H` (default: the address) on `-p` (or the first positional argument,
//! or `vars.port`); `-w`/`-c` are response-time ranges in seconds.

use super::{Builtin, Outcome, flag_text, grade, status_word};
use crate::runtime::Stopwatch;

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let port = ctx
        .args
        .get(&["-p", "--port"])
        .map(str::to_string)
        .or_else(|| ctx.args.positional.first().cloned())
        .or_else(|| ctx.spec.vars.as_ref().and_then(|v| v.get("port").cloned()));
    let Some(port) = port.and_then(|p| p.parse::<u16>().ok()) else {
        return Outcome::unknown("TCP", "no port (-p, args[0] or vars.port)");
    };
    let Some(address) = ctx.target() else {
        return Outcome::unknown("TCP", "no address");
    };
    let (warn, crit) = match (
        ctx.range(&["-w", "--warning"]),
        ctx.range(&["-c", "--critical"]),
    ) {
        (Ok(w), Ok(c)) => (w, c),
        (Err(e), _) | (_, Err(e)) => return Outcome::unknown("TCP", e),
    };
    let watch = Stopwatch::start();
    let connect = tokio::net::TcpStream::connect((address.as_str(), port));
    match tokio::time::timeout(ctx.timeout, connect).await {
        Ok(Ok(_)) => {
            let secs = watch.elapsed().as_secs_f64();
            let code = grade(secs, warn.as_ref(), crit.as_ref());
            Outcome::new(
                code,
                format!(
                    "TCP {} - {secs:.3} second response time on {address} port {port} | time={secs:.6}s;{};{};0",
                    status_word(code),
                    flag_text(ctx, &["-w", "--warning"]),
                    flag_text(ctx, &["-c", "--critical"]),
                ),
            )
        }
        Ok(Err(e)) => Outcome::new(2, format!("TCP CRITICAL - {e} on {address} port {port}")),
        Err(_) => Outcome::new(
            2,
            format!(
                "TCP CRITICAL - no answer within {}s on {address} port {port}",
                ctx.timeout.as_secs()
            ),
        ),
    }
}
