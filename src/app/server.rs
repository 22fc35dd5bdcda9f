//! The accept loop: optional TLS, HTTP/1.1 per connection, the peer address handed to handlers
//! (IP binding and rate limits use the TCP peer, never X-Forwarded-For), graceful drain.

use crate::api::access::DirectTls;
use crate::runtime::Shutdown;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Kernel send buffer per connection (inherited from the listener). A fixed size bounds the
/// kernel memory of many long-lived SSE clients on a small board, and lets a stalled client
/// back up into its bounded bus buffer instead of megabytes of socket buffer.
const SEND_BUFFER: u32 = 256 * 1024;
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

async fn serve_connection<I>(io: I, peer: SocketAddr, tls: bool, router: Router, watcher: Watcher)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(DirectTls(tls));
        router.clone().oneshot(req.map(Body::new))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(io), service);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Binds the listening socket.
pub fn listen(addr: &str) -> std::io::Result<TcpListener> {
    let addr: SocketAddr = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_send_buffer_size(SEND_BUFFER)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

pub async fn run(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    stop: Shutdown,
    drain: Duration,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.wait() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let watcher = graceful.watcher();
        let acceptor = tls.clone();
        tokio::spawn(async move {
            match acceptor {
                None => serve_connection(stream, peer, false, router, watcher).await,
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(tls_stream)) => {
                            serve_connection(tls_stream, peer, true, router, watcher).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open at the drain deadline; closing them");
    }
}
