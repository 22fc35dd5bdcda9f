//! `tcp`: connects to `-H` (default: the address) on `-p` (or the first positional argument,
//! or `vars.port`); `-w`/`-c` are response-time ranges in seconds.

use super::{Builtin, Outcome, status_word};
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
    let limits = match ctx.limits() {
        Ok(l) => l,
        Err(e) => return Outcome::unknown("TCP", e),
    };
    let watch = Stopwatch::start();
    let connect = tokio::net::TcpStream::connect((address.as_str(), port));
    match tokio::time::timeout(ctx.timeout, connect).await {
        Ok(Ok(_)) => {
            let secs = watch.elapsed().as_secs_f64();
            let code = limits.grade(secs);
            Outcome::new(
                code,
                format!(
                    "TCP {} - {secs:.3} second response time on {address} port {port} | time={secs:.6}s;{};0",
                    status_word(code),
                    limits.perf(),
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
