//! The gateway's upstream HTTP client and the request body it sends: a pooled HTTP/1.1 client
//! (keep-alive, `TCP_NODELAY`), and a body that streams the client's body through with the 1 MiB
//! limit while remembering whether an attempt ever polled it (only an attempt that never did may
//! be retried on another replica). A leaf: proxying and probing both use it.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::body::HttpBody as _;
use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use thread_local::ThreadLocal;

/// Largest request body the gateway passes on (docs/conventions.md).
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// Idle keep-alive connections kept per replica: enough for 256 concurrent clients.
const POOL_IDLE_PER_REPLICA: usize = 512;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The pooled client used for proxying and probing.
pub type UpstreamClient = Client<HttpConnector, OutBody>;

/// How long an idle upstream connection stays pooled. The services close a keep-alive connection
/// that idles for their header read timeout (10 s by default); a pooled connection must be
/// retired well before that, or the gateway would send a request on a connection the service is
/// closing at that moment (a reset, or a 502 for a request that never arrived).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// The gateway's HTTP client: HTTP/1.1 keep-alive connections pooled per replica, `TCP_NODELAY`,
/// a connect timeout, no proxy from the environment, no redirects, no body timeout (only the time
/// to response headers is bounded, by the caller).
pub fn build_client(connect_timeout: Duration) -> UpstreamClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_keepalive(Some(Duration::from_secs(60)));
    connector.enforce_http(true);
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_IDLE_PER_REPLICA)
        .build(connector)
}

/// A pooled client for each thread that asks (each gateway worker): a request and the upstream
/// connection it travels on stay on one thread, and the pools need no lock shared between
/// threads.
pub struct PerThreadClient {
    connect_timeout: Duration,
    clients: ThreadLocal<UpstreamClient>,
}

impl PerThreadClient {
    pub fn new(connect_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            clients: ThreadLocal::new(),
        }
    }

    /// The calling thread's client, built on first use.
    pub fn get(&self) -> &UpstreamClient {
        self.clients.get_or(|| build_client(self.connect_timeout))
    }
}

/// The state of a request body shared between attempts: an attempt whose connection failed never
/// polled it, so the next replica can still send it whole.
#[derive(Default)]
pub struct BodyState {
    slot: Mutex<Option<Body>>,
    polled: AtomicBool,
    exceeded: AtomicBool,
    finished: AtomicBool,
    seen: AtomicU64,
}

impl BodyState {
    pub fn new(body: Body) -> Arc<Self> {
        Arc::new(Self {
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
            let Ok(frame) = frame else { break };
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
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
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
