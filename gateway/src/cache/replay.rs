//! The body of a stored answer on its way to a client, in pieces.
//!
//! The listener copies every piece of a body into its connection's write buffer (it writes with
//! `send`, not `writev`), and takes another piece only when that buffer has room. A stored body
//! handed over as one piece would be copied whole into the buffer of every client it goes to: a
//! few thousand slow clients of one 2 MiB answer would hold gigabytes. Handed over in pieces (each
//! a view of the stored bytes, nothing copied here), a client holds no more of it than of any
//! answer streamed from a service, and the stored body itself once, however many read it.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// The largest piece handed over at once. A body up to this size goes as one piece, as before.
const PIECE: usize = 64 * 1024;

/// `body` as the body of an answer.
pub fn replayed(body: &Bytes) -> Body {
    if body.len() <= PIECE {
        return Body::from(body.clone());
    }
    Body::new(Pieces { rest: body.clone() })
}

/// The part of a stored body not handed over yet.
struct Pieces {
    rest: Bytes,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.rest.is_empty() {
            return Poll::Ready(None);
        }
        let take = self.rest.len().min(PIECE);
        Poll::Ready(Some(Ok(Frame::data(self.rest.split_to(take)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn a_large_body_goes_in_pieces_that_make_it_whole() {
        let stored = Bytes::from((0..PIECE * 2 + 10).map(|i| i as u8).collect::<Vec<u8>>());
        let mut body = replayed(&stored);
        assert_eq!(body.size_hint().exact(), Some(stored.len() as u64));
        let mut pieces = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            pieces.push(frame.unwrap().into_data().unwrap());
        }
        let sizes: Vec<usize> = pieces.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [PIECE, PIECE, 10]);
        assert_eq!(pieces.concat(), stored);
        assert!(body.is_end_stream());
    }

    #[test]
    fn a_small_body_goes_whole() {
        let stored = Bytes::from_static(b"hello");
        assert_eq!(replayed(&stored).size_hint().exact(), Some(5));
    }
}
