//! The gateway's upstream HTTP client and the request body it sends: HTTP/1.1 keep-alive
//! connections (`TCP_NODELAY`) pooled per thread and replica, and a body that streams the
//! client's body through with the 1 MiB limit while remembering whether an attempt ever polled it
//! (only an attempt that never did may be retried on another replica). A leaf: proxying and
//! probing both use it.
//!
//! The pool is hyper's connection API with a thread-local list of idle connections, not
//! hyper-util's pooled client: that one locks its pool and spawns a task per response to return
//! the connection, which showed in the gateway's profile. Each gateway worker is one thread, so a
//! request, its upstream connection and the pool it returns to stay on that thread.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::http::uri::Authority;
use axum::http::{HeaderValue, Request, Response, header};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Largest request body the gateway passes on (docs/conventions.md).
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// Idle keep-alive connections kept per replica and thread: enough for 256 concurrent clients.
const POOL_IDLE_PER_REPLICA: usize = 512;

/// How long an idle upstream connection stays pooled. The services close a keep-alive connection
/// that idles for their header read timeout (10 s by default); a pooled connection must be
/// retired well before that, or the gateway would send a request on a connection the service is
/// closing at that moment (a reset, or a 502 for a request that never arrived).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One replica as the client sees it: the `host:port` it dials, the `Host` header it sends, and
/// the number of its pool of idle connections.
pub struct Endpoint {
    authority: Authority,
    host: HeaderValue,
    pool: usize,
}

/// The pool number of the next endpoint. Pools are found by number rather than by hashing the
/// authority: two hashed lookups per request showed in the gateway's profile.
static NEXT_POOL: AtomicUsize = AtomicUsize::new(0);

impl Endpoint {
    pub fn new(authority: Authority) -> Self {
        let host = HeaderValue::from_str(authority.as_str())
            .unwrap_or(HeaderValue::from_static("invalid.invalid"));
        Self {
            authority,
            host,
            pool: NEXT_POOL.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub fn authority(&self) -> &Authority {
        &self.authority
    }
}

/// Why a request got no response.
#[derive(Debug)]
pub enum SendError {
    /// Nothing reached the replica: no connection could be made, or it closed before the request
    /// went out. Another replica may be tried.
    NotSent(std::io::Error),
    /// The request failed on an established connection; it may have been (partly) sent.
    Failed(hyper::Error),
}

impl SendError {
    /// The upstream answered, but not with HTTP/1.1 the client could read: garbage, a head over
    /// hyper's size limit, an invalid status, or conflicting `Content-Length`s.
    pub fn is_unreadable_answer(&self) -> bool {
        matches!(self, SendError::Failed(error) if error.is_parse())
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::NotSent(error) => write!(f, "not sent: {error}"),
            SendError::Failed(error) => write!(f, "{error}"),
        }
    }
}

/// The upstream client used for proxying and probing.
pub struct UpstreamClient {
    connect_timeout: Duration,
    body_idle_timeout: Duration,
}

impl UpstreamClient {
    /// `body_idle_timeout`: how long a response body may stall between two of its pieces
    /// before the response is cut off.
    pub fn new(connect_timeout: Duration, body_idle_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            body_idle_timeout,
        }
    }

    /// Sends `request` (its URI in origin form, `/path?query`) to `endpoint` on an idle pooled
    /// connection of this thread, or on a new one. A pooled connection that turns out to be
    /// closed before the request went out is set aside and the next one tried.
    pub async fn send(
        &self,
        endpoint: &Endpoint,
        mut request: Request<OutBody>,
    ) -> Result<Response<PooledBody>, SendError> {
        request
            .headers_mut()
            .insert(header::HOST, endpoint.host.clone());
        loop {
            let (mut sender, reused) = match take_idle(endpoint.pool).await {
                Some(sender) => (sender, true),
                // Boxed: a new connection is the rare case, and its futures (connect, timeout,
                // handshake) would otherwise sit in every request's future, which is moved
                // around whole.
                None => (Box::pin(self.connect(&endpoint.authority)).await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let (pool, idle_timeout) = (endpoint.pool, self.body_idle_timeout);
                    return Ok(
                        response.map(|body| PooledBody::new(body, pool, sender, idle_timeout))
                    );
                }
                Err(mut error) => match error.take_message() {
                    Some(unsent) if reused => request = unsent,
                    Some(_) => {
                        return Err(SendError::NotSent(std::io::Error::other(
                            error.into_error(),
                        )));
                    }
                    None => return Err(SendError::Failed(error.into_error())),
                },
            }
        }
    }

    async fn connect(&self, authority: &Authority) -> Result<SendRequest<OutBody>, SendError> {
        let connecting = TcpStream::connect(authority.as_str());
        let stream = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(SendError::NotSent(error)),
            Err(_elapsed) => {
                return Err(SendError::NotSent(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                )));
            }
        };
        let _ = stream.set_nodelay(true);
        // Flattened writes (`send`, not `writev`), as on the gateway's own side (server.rs).
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .writev(false)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|error| SendError::NotSent(std::io::Error::other(error)))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream connection ended with an error");
            }
        });
        Ok(sender)
    }
}

struct IdleConnection {
    sender: SendRequest<OutBody>,
    since: Instant,
}

thread_local! {
    /// This thread's idle upstream connections, by endpoint pool number, oldest first.
    static IDLE: RefCell<Vec<VecDeque<IdleConnection>>> = const { RefCell::new(Vec::new()) };
}

/// The most recently pooled connection of endpoint `pool` that is still open and ready.
async fn take_idle(pool: usize) -> Option<SendRequest<OutBody>> {
    while let Some(mut sender) = pop_idle(pool) {
        // Ready once its connection has finished the previous exchange; an error if it closed.
        if sender.ready().await.is_ok() {
            return Some(sender);
        }
    }
    None
}

fn pop_idle(pool: usize) -> Option<SendRequest<OutBody>> {
    IDLE.with_borrow_mut(|idle| {
        let connections = idle.get_mut(pool)?;
        while let Some(connection) = connections.pop_back() {
            if connection.since.elapsed() > POOL_IDLE_TIMEOUT {
                // The older ones have idled even longer.
                connections.clear();
                return None;
            }
            if !connection.sender.is_closed() {
                return Some(connection.sender);
            }
        }
        None
    })
}

/// Closes this thread's pooled connections once they have idled for [`POOL_IDLE_TIMEOUT`],
/// checking every second; run by each thread that pools connections (each gateway worker, and
/// the probes' runtime). The gateway must be the side that closes an idle connection, before the
/// service's own idle timeout does: the side that closes first keeps the TIME_WAIT, and with the
/// TIME_WAIT on the service's side a new connection that happens to reuse the port can lose its
/// SYN and wait a second to retransmit it (a benchmark saw every connect time out at 1 s that
/// way, and the replica put in cooldown).
pub async fn close_idle_connections_forever() {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticker.tick().await;
        IDLE.with_borrow_mut(|idle| {
            for connections in idle.iter_mut() {
                drop_expired(connections);
            }
        });
    }
}

/// Drops (and so closes) the connections at the front that have idled too long.
fn drop_expired(connections: &mut VecDeque<IdleConnection>) {
    while connections
        .front()
        .is_some_and(|oldest| oldest.since.elapsed() > POOL_IDLE_TIMEOUT)
    {
        connections.pop_front();
    }
}

fn put_idle(pool: usize, sender: SendRequest<OutBody>) {
    // A thread that is exiting has no pool left: the connection just closes.
    let _ = IDLE.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        if idle.len() <= pool {
            idle.resize_with(pool + 1, VecDeque::new);
        }
        let connections = &mut idle[pool];
        drop_expired(connections);
        if connections.len() >= POOL_IDLE_PER_REPLICA {
            connections.pop_front();
        }
        connections.push_back(IdleConnection {
            sender,
            since: Instant::now(),
        });
    });
}

/// Whether a body error is broken framing (bad chunk sizes and the like: not HTTP/1.1) rather than
/// a connection that closed or failed before the body's end.
pub fn is_broken_framing(error: &hyper::Error) -> bool {
    use std::error::Error as _;
    error
        .source()
        .and_then(|cause| cause.downcast_ref::<std::io::Error>())
        .is_some_and(|cause| {
            matches!(
                cause.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            )
        })
}

/// An upstream response body that returns its connection to the pool once it has been read to
/// the end. A body dropped before its end takes the connection with it (hyper closes it). A body
/// that stalls for `idle_timeout` between two pieces ends in an error: the client's connection
/// is closed (its status line is long gone) rather than left waiting for ever.
pub struct PooledBody {
    body: Incoming,
    connection: Option<(usize, SendRequest<OutBody>)>,
    ended: bool,
    idle_timeout: Duration,
    /// Armed only while a piece is awaited: the usual body is there at once and pays nothing.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The piece [`Self::read_first_piece`] read ahead, handed out first.
    first: Option<http_body::Frame<Bytes>>,
}

impl PooledBody {
    fn new(
        body: Incoming,
        pool: usize,
        sender: SendRequest<OutBody>,
        idle_timeout: Duration,
    ) -> Self {
        Self {
            body,
            connection: Some((pool, sender)),
            ended: false,
            idle_timeout,
            stall: None,
            first: None,
        }
    }

    /// Reads the body's first piece (or its end) ahead and keeps it to be handed out first. Until
    /// it is there nothing of the answer has gone to the client, so the proxy can still answer
    /// an upstream that breaks off before its body with a problem instead of an empty reply.
    /// The caller bounds the wait (the stall timer is for the pieces after it).
    pub async fn read_first_piece(&mut self) -> Result<(), hyper::Error> {
        if self.body.is_end_stream() {
            return Ok(());
        }
        match std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await {
            Some(Ok(frame)) => self.first = Some(frame),
            Some(Err(error)) => return Err(error),
            None => self.ended = true,
        }
        Ok(())
    }
}

impl http_body::Body for PooledBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Pending => {
                let idle_timeout = self.idle_timeout;
                let stall = self
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle_timeout)));
                if stall.as_mut().poll(cx).is_ready() {
                    tracing::warn!(?idle_timeout, "an upstream response body stalled; cut off");
                    self.connection = None;
                    return Poll::Ready(Some(Err("the upstream response body stalled".into())));
                }
                return Poll::Pending;
            }
            Poll::Ready(None) => self.ended = true,
            Poll::Ready(Some(_)) => {}
        }
        self.stall = None;
        polled.map(|frame| frame.map(|frame| frame.map_err(BoxError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && (self.ended || self.body.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if self.is_end_stream() {
            // A chunked body found empty by `read_first_piece` goes out with `Content-Length: 0`.
            return http_body::SizeHint::with_exact(0);
        }
        let rest = self.body.size_hint();
        let Some(first) = self.first.as_ref().and_then(http_body::Frame::data_ref) else {
            return rest;
        };
        let first = first.len() as u64;
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(rest.lower() + first);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + first);
        }
        hint
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        if (self.ended || self.body.is_end_stream())
            && let Some((pool, sender)) = self.connection.take()
        {
            put_idle(pool, sender);
        }
    }
}

/// The state of a request body shared between attempts: an attempt whose connection failed never
/// polled it, so the next replica can still send it whole.
#[derive(Default)]
pub struct BodyState {
    slot: Mutex<Option<Body>>,
    polled: AtomicBool,
    exceeded: AtomicBool,
    /// The client's body ended in an error (it broke off before its declared end, or its
    /// chunked framing was bad): the client's fault, not the upstream's.
    broke_off: AtomicBool,
    finished: AtomicBool,
    seen: AtomicU64,
    /// The body's length when the client declared one (`Content-Length`).
    declared: Option<u64>,
}

impl BodyState {
    pub fn new(body: Body) -> Arc<Self> {
        Arc::new(Self {
            declared: body.size_hint().exact(),
            slot: Mutex::new(Some(body)),
            ..Self::default()
        })
    }

    pub fn was_polled(&self) -> bool {
        self.polled.load(Ordering::SeqCst)
    }

    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::SeqCst)
    }

    pub fn broke_off(&self) -> bool {
        self.broke_off.load(Ordering::SeqCst)
    }

    /// Whether an attempt is reading the client's body and the client has not sent all of it
    /// (a body of known length is whole once that many bytes went through: hyper stops asking
    /// for more then).
    pub fn still_arriving(&self) -> bool {
        let whole = self.finished.load(Ordering::SeqCst)
            || self
                .declared
                .is_some_and(|length| self.seen.load(Ordering::SeqCst) >= length);
        self.was_polled() && !whole
    }

    /// Counts `len` more bytes; false once the total is over the limit.
    fn count(&self, len: usize) -> bool {
        let total = self.seen.fetch_add(len as u64, Ordering::SeqCst) + len as u64;
        if total > MAX_BODY_BYTES {
            self.exceeded.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Reads what is left of the client's body (at most to the limit) after the upstream stopped
    /// reading it; true when it turns out to be over the limit.
    pub async fn drain_is_too_large(&self) -> bool {
        if self.exceeded() || self.finished.load(Ordering::SeqCst) {
            return self.exceeded();
        }
        let body = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut body) = body else {
            return self.exceeded();
        };
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(frame) = frame else {
                self.broke_off.store(true, Ordering::SeqCst);
                break;
            };
            if let Ok(data) = frame.into_data()
                && !self.count(data.len())
            {
                return true;
            }
        }
        false
    }
}

/// The body of one attempt: nothing, or the client's body streamed through with the limit.
pub enum OutBody {
    Empty,
    Streamed(Arc<BodyState>),
}

impl http_body::Body for OutBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let state = match self.get_mut() {
            OutBody::Empty => return Poll::Ready(None),
            OutBody::Streamed(state) => state,
        };
        state.polled.store(true, Ordering::SeqCst);
        let mut slot = state.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(body) = slot.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            let frame = match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    state.finished.store(true, Ordering::SeqCst);
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(error))) => {
                    state.broke_off.store(true, Ordering::SeqCst);
                    return Poll::Ready(Some(Err(error.into())));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            // Trailers are not forwarded: skip to the next frame.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if !state.count(data.len()) {
                *slot = None;
                return Poll::Ready(Some(Err("request body too large".into())));
            }
            return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, OutBody::Empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            OutBody::Empty => http_body::SizeHint::with_exact(0),
            OutBody::Streamed(state) => state
                .slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|body| body.size_hint())
                .unwrap_or_default(),
        }
    }
}
