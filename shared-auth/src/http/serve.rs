//! Serving a router over HTTP/1.1 the way every binary should: what `axum::serve` does (a task per
//! connection, `ConnectInfo<SocketAddr>` for handlers that want the peer, graceful shutdown that
//! stops accepting and drains what is in flight), plus the contract's header read timeout: a
//! connection whose request head has not fully arrived in time is closed, so slow or idle clients
//! cannot hold sockets open (docs: conventions, "Time and load"). It also names the allowed
//! methods in the `detail` of every 405 problem, which only this outermost place can do: axum
//! adds `Allow` after the router's own layers have run. Written for the services and usable as
//! is by the gateway.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tower::Layer;
use tower::ServiceExt;

use crate::http::body::{announce_close, drained_when_dropped};
use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

/// Header fields a service takes in one request head. Clients may send 100 (the gateway's limit,
/// hyper's default); the gateway adds its own (`X-Forwarded-For/Proto/Host`, `X-Request-Id`,
/// `traceparent`), and a request it accepted must not then be refused for them.
pub const MAX_HEADERS: usize = 120;

/// How long a client may take to send a whole request head (and how long an idle keep-alive
/// connection stays open): 10 s, as the contract says.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections the kernel completes and queues for a listener before its server accepts them.
/// tokio's `TcpListener::bind` asks for 128, as the standard library does; a burst beyond that (a
/// gateway opening a few hundred upstream connections at once while the service is busy) has its
/// SYNs dropped, and a dropped SYN is only sent again after a second. The kernel caps the value at
/// `net.core.somaxconn` (4096 by default).
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener on the first address `address` resolves to, with [`LISTEN_BACKLOG`]; every binary
/// listens through this.
pub async fn bind(address: impl tokio::net::ToSocketAddrs) -> io::Result<TcpListener> {
    let mut failure = None;
    for candidate in tokio::net::lookup_host(address).await? {
        match listen_on(candidate) {
            Ok(listener) => return Ok(listener),
            Err(error) => failure = Some(error),
        }
    }
    Err(failure.unwrap_or_else(|| io::Error::other("the address resolves to no address")))
}

fn listen_on(address: SocketAddr) -> io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restarted binary can listen again at once.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits for
/// the open connections to finish their requests.
pub async fn serve(
    mut listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Connection tasks watch `stop` to start their graceful shutdown; `done` closes once every
    // task has dropped its receiver.
    let (stop_tx, stop_rx) = watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(stop_rx);
    });
    let (done_tx, done_rx) = watch::channel(());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            () = stop_tx.closed() => break,
        };
        let connection = Connection {
            router: router.clone(),
            header_read_timeout,
            stop: stop_tx.clone(),
            done: done_rx.clone(),
        };
        tokio::spawn(connection.run(stream, peer));
    }
    drop(listener);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

struct Connection {
    router: Router,
    header_read_timeout: Duration,
    stop: watch::Sender<()>,
    done: watch::Receiver<()>,
}

impl Connection {
    async fn run(self, stream: TcpStream, peer: SocketAddr) {
        let service = from_fn(name_allowed_methods)
            .layer(from_fn(announce_close).layer(self.router))
            .map_request(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                drained_when_dropped(request)
            });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            // A client that sends its request and then closes its sending side (HTTP/1.0 tools,
            // `nc -N`) still gets its answer.
            .half_close(true)
            .max_headers(MAX_HEADERS);
        let mut connection = pin!(
            builder
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .with_upgrades()
        );
        let mut stopping = pin!(self.stop.closed());
        let mut stop_requested = false;
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                    break;
                }
                () = &mut stopping, if !stop_requested => {
                    stop_requested = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
        drop(self.done);
    }
}

/// Middleware around the whole router: a 405 problem gets a `detail` naming its `Allow` header.
pub async fn name_allowed_methods(request: axum::extract::Request, next: Next) -> Response {
    with_allowed_methods_named(next.run(request).await).await
}

/// What [`name_allowed_methods`] does to a response, for a binary that calls its router itself
/// (the gateway): a 405 problem gets a `detail` naming its `Allow` header.
pub async fn with_allowed_methods_named(response: Response) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(detail) = response
        .headers()
        .get(header::ALLOW)
        .map(allowed_methods_detail)
    else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    // A 405 problem is a few hundred bytes; anything else is passed on untouched.
    let Ok(bytes) = to_bytes(body, 16 * 1024).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(serde_json::Value::Object(mut problem)) = serde_json::from_slice(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    problem.insert("detail".into(), detail.into());
    let body = serde_json::to_vec(&problem).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// A 405 problem for a resource that answers the methods of `allow` (an `Allow` header value,
/// `GET,HEAD`), as the services' routers answer it: for the gateway, which refuses some methods
/// itself.
pub fn method_not_allowed(allow: &'static str) -> Problem {
    let allow = HeaderValue::from_static(allow);
    Problem::from_code(SharedCode::MethodNotAllowed)
        .with_detail(allowed_methods_detail(&allow))
        .with_header(header::ALLOW, allow)
}

/// The `detail` of a 405: the contract wants the allowed methods named, as `Allow` lists them.
fn allowed_methods_detail(allow: &HeaderValue) -> String {
    let methods: Vec<&str> = allow
        .to_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|method| !method.is_empty())
        .collect();
    format!("this resource allows only {}", methods.join(", "))
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_burst_of_connections_is_queued_not_dropped() {
        // Nothing accepts: with tokio's default backlog of 128, connections past it would wait
        // a second for their SYN to be sent again.
        let listener = bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for index in 0..400 {
            let connecting = TcpStream::connect(address);
            match tokio::time::timeout(Duration::from_millis(500), connecting).await {
                Ok(Ok(stream)) => queued.push(stream),
                other => panic!("connection {index} was not queued: {other:?}"),
            }
        }
        assert!(bind("no-such-host.invalid:80").await.is_err());
    }

    #[tokio::test]
    async fn a_405_problem_names_the_allowed_methods() {
        let router = crate::http::stack::service_stack(
            Router::new().route("/thing", get(|| async { "ok" })),
            crate::http::metrics::HttpMetrics::builder("test").build(),
        );
        let app = from_fn(name_allowed_methods).layer(router);
        let request = Request::delete("/thing")
            .header(header::HOST, "x")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        let allow = response.headers()[header::ALLOW].clone();
        assert_eq!(allow, "GET,HEAD");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["code"], "method_not_allowed");
        assert_eq!(problem["detail"], "this resource allows only GET, HEAD");
    }
}
