//! The gateway's listener: hyper's HTTP/1.1 server with a deadline for the request head (a client
//! that sends nothing, or part of a head, and idles is disconnected) and one for each write of an
//! answer (a client that stops reading is disconnected, as nginx's `send_timeout` does, instead of
//! holding the answer's memory and its upstream connection), `TCP_NODELAY`, the peer
//! address handed to the router as `ConnectInfo`, and a graceful shutdown that stops accepting and
//! waits for the connections in flight.
//!
//! Connections are served by worker threads, each running its own single-threaded event loop
//! and accepting from the one shared listener (the model of HAProxy, nginx and Envoy). A
//! connection, its requests and the upstream connections they use stay on one thread, so a
//! request is never handed between threads: on a multi-threaded runtime those hand-offs (a
//! thread woken for every step) cost more than the proxying itself.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use shared_auth::http::body::drained_when_dropped;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio_io_timeout::TimeoutStream;

use crate::client;
use crate::config::ClientTimeouts;
use crate::dispatch::Frontend;

/// Serves `frontend` on `listener` with `workers` threads until `shutdown` resolves, then waits
/// for open connections to finish their requests.
pub async fn serve<F>(
    listener: TcpListener,
    frontend: Frontend,
    timeouts: ClientTimeouts,
    workers: usize,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let listener = listener.into_std()?;
    let (stop, stopped) = watch::channel(false);
    let workers = workers.max(1);
    let mut finished = Vec::with_capacity(workers);
    for index in 0..workers {
        let listener = listener.try_clone()?;
        let frontend = frontend.clone();
        let stopped = stopped.clone();
        let (done, finished_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name(format!("gateway-worker-{index}"))
            .spawn(move || {
                let served = run_worker(listener, frontend, timeouts, stopped);
                let _ = done.send(served);
            })?;
        finished.push(finished_rx);
    }
    drop(listener);

    shutdown.await;
    let _ = stop.send(true);
    for worker in finished {
        // A worker that panicked dropped its sender: report it rather than hide it.
        worker
            .await
            .map_err(|_| std::io::Error::other("a gateway worker thread panicked"))??;
    }
    Ok(())
}

/// One worker: a single-threaded runtime accepting from `listener` until told to stop.
fn run_worker(
    listener: std::net::TcpListener,
    frontend: Frontend,
    timeouts: ClientTimeouts,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener)?;
        let idle_closer = tokio::spawn(client::close_idle_connections_forever());
        let stop = async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        accept_loop(listener, frontend, timeouts, stop).await;
        idle_closer.abort();
        Ok(())
    })
}

async fn accept_loop<F>(
    listener: TcpListener,
    frontend: Frontend,
    timeouts: ClientTimeouts,
    shutdown: F,
) where
    F: Future<Output = ()>,
{
    // HTTP/1.1 only: hyper-util's protocol-sniffing server reads a connection's first bytes
    // without any deadline, so a client that connected and sent nothing was never closed. Clients
    // speak HTTP/2 to the load balancer in front, if at all.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read)
        .keep_alive(true)
        // A client that sends its request and then closes its sending side (HTTP/1.0 tools,
        // `nc -N`) still gets its answer.
        .half_close(true)
        // One buffer per write: `send` rather than `writev`, whose path through the kernel's
        // file layer costs more than copying a response's few kilobytes (client.rs does the same).
        .writev(false);
    let builder = Arc::new(builder);
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
        let frontend = frontend.clone();
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            // A body left unread (a refusal) is read to its end before the connection closes.
            let answer = Box::pin(frontend.clone().handle(drained_when_dropped(request)));
            async move { Ok::<_, Infallible>(answer.await) }
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // A write that cannot go out for `send` (the client's receive window and the
            // socket's send buffer are full) fails, and the connection with it.
            let mut stream = TimeoutStream::new(stream);
            stream.set_write_timeout(Some(timeouts.send));
            let stream = TokioIo::new(Box::pin(stream));
            let connection = builder.serve_connection(stream, service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
