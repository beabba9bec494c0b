//! The gateway's listener: hyper's HTTP/1.1 and HTTP/2 server with a deadline for the request
//! head (a client that sends part of a head and idles is disconnected), `TCP_NODELAY`, the peer
//! address handed to the router as `ConnectInfo`, and a graceful shutdown that stops accepting and
//! waits for the connections in flight.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::middleware::from_fn;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use shared_auth::http::serve::name_allowed_methods;
use tokio::net::TcpListener;
use tower::{Layer as _, ServiceExt as _};

/// Serves `router` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests.
pub async fn serve<F>(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    // axum adds `Allow` to a 405 only outside the router's own layers: name the methods here.
    let app = from_fn(name_allowed_methods).layer(router);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = app
            .clone()
            .map_request(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request.map(Body::new)
            });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let connection =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
