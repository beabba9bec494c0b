//! Request bodies that a service leaves unread are read to their end in the background, so that
//! the answer reaches the client and the connection can carry the next request.
//!
//! Why: a server that answers and closes a connection while request bytes are still unread makes
//! the kernel reset the connection, and the reset can destroy the answer before the client reads
//! it. Behind the gateway that turned a 413 (or a 405, 415, 401, 404 or 503 given to a request
//! with a large body) into a 502 `upstream_unavailable` now and then, a 502 the client is told it
//! may retry. Draining after the fact, rather than reading every body before routing, keeps the
//! order in which a service refuses (route, method, token, then body) and never makes a request
//! wait for its body before it is refused.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Request, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};

/// How much of an unread body is read and thrown away (after whatever the handler read): more
/// than the gateway passes on (1 MiB). A client that sends more directly is disconnected instead.
const MAX_DISCARDED_BYTES: u64 = 2 * 1024 * 1024;

/// How long a client may take to send the rest of a body nobody reads.
const MAX_DISCARD_TIME: Duration = Duration::from_secs(10);

/// The request as handlers see it: a body that is dropped before its end is drained (see the
/// module documentation).
pub fn drained_when_dropped(mut request: Request<Incoming>) -> Request<Body> {
    if request.body().is_end_stream() {
        return request.map(Body::new);
    }
    let waits_for_continue =
        request.version() >= Version::HTTP_11 && expects_continue(request.headers());
    let left_unread = LeftUnread::default();
    request.extensions_mut().insert(left_unread.clone());
    request.map(|body| {
        Body::new(DrainedWhenDropped {
            body: Some(body),
            polled: false,
            ended: false,
            waits_for_continue,
            left_unread,
        })
    })
}

/// Set once a request's body was dropped and will not be drained (its client waits for
/// `100 Continue`, or it is longer than [`MAX_DISCARDED_BYTES`]): hyper will close the connection
/// after the answer, and the answer should say so (see [`announce_close`]).
#[derive(Clone, Default)]
pub struct LeftUnread(Arc<AtomicBool>);

/// Adds `Connection: close` to the answer of a request whose body is left unread, so the client
/// knows the connection ends with it rather than finding out on its next request.
pub async fn announce_close(request: axum::extract::Request, next: Next) -> Response {
    let left_unread = request.extensions().get::<LeftUnread>().cloned();
    let mut response = next.run(request).await;
    if left_unread.is_some_and(|flag| flag.0.load(Ordering::Relaxed)) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Whether hyper will wait to send `100 Continue` (it reads the last `Expect` header).
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::EXPECT)
        .iter()
        .next_back()
        .is_some_and(|expect| expect.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

struct DrainedWhenDropped {
    body: Option<Incoming>,
    polled: bool,
    ended: bool,
    /// The client sends the body only once asked (`Expect: 100-continue`); hyper asks when the
    /// body is first polled, and only while no answer has been written.
    waits_for_continue: bool,
    left_unread: LeftUnread,
}

impl hyper::body::Body for DrainedWhenDropped {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        this.polled = true;
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map(Incoming::size_hint)
            .unwrap_or_default()
    }
}

impl Drop for DrainedWhenDropped {
    fn drop(&mut self) {
        let Some(body) = self.body.take() else {
            return;
        };
        // A client still waiting for `100 Continue` has sent nothing: hyper closes the
        // connection's reading side without inviting the body, which is what it should do.
        let never_sent = self.waits_for_continue && !self.polled;
        let too_long = body
            .size_hint()
            .exact()
            .is_some_and(|len| len > MAX_DISCARDED_BYTES);
        if self.ended || body.is_end_stream() {
            return;
        }
        if never_sent || too_long {
            self.left_unread.0.store(true, Ordering::Relaxed);
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(discard(body));
        }
    }
}

/// Reads `body` to its end, keeping nothing, within [`MAX_DISCARDED_BYTES`] and
/// [`MAX_DISCARD_TIME`]; past either it is dropped, and hyper closes the connection.
async fn discard(mut body: Incoming) {
    let reading = async {
        let mut discarded = 0;
        while let Some(Ok(frame)) = body.frame().await {
            discarded += frame.data_ref().map_or(0, |data| data.len() as u64);
            if discarded > MAX_DISCARDED_BYTES {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(MAX_DISCARD_TIME, reading).await;
}
