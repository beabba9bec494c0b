//! The bytes the cache reads at once to store answers (docs/gateway.md, "Cached public answers").
//!
//! A storable answer is read whole before any of it goes to its client, so that it can be stored
//! (a fill). Every fill takes the bytes it holds from one budget shared by all fills; a fill that
//! finds no room is not buffered but streamed through uncached, like an answer over the size
//! limit. However many distinct misses arrive at once (a client asking for thousands of `?cursor=`
//! pages), the bytes held for answers on their way into the cache stay within the budget, and
//! nothing waits for room.
//!
//! The budget costs a fill a compare-and-swap when it takes bytes and a subtraction when it gives
//! them back; a hit touches it not at all.

use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt as _;
use prometheus_client::metrics::gauge::Gauge;

/// The bytes all fills may hold at once.
pub struct FillBudget {
    limit: i64,
    /// The bytes held now. It is the `gateway_answer_cache_filling_bytes` gauge itself: keeping
    /// the metric costs nothing beside the budget's own atomic operations.
    filling: Gauge,
}

impl FillBudget {
    pub fn new(limit: u64, filling: Gauge) -> Self {
        Self {
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            filling,
        }
    }

    /// An empty reservation for one fill, grown as the fill reads.
    pub fn reserve(&self) -> Reserved<'_> {
        Reserved {
            budget: self,
            bytes: 0,
        }
    }

    /// Takes `bytes` if they fit under the limit; never overshoots it, even for a moment.
    fn take(&self, bytes: i64) -> bool {
        self.filling
            .inner()
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&after| after <= self.limit)
            })
            .is_ok()
    }
}

/// The bytes one fill holds, given back when it is dropped (stored, failed, or its client gone).
pub struct Reserved<'a> {
    budget: &'a FillBudget,
    bytes: i64,
}

impl Reserved<'_> {
    /// Grows the reservation to `total` bytes; `false` (and unchanged) when the budget has no
    /// room for them.
    pub fn grow_to(&mut self, total: u64) -> bool {
        let more = i64::try_from(total).unwrap_or(i64::MAX) - self.bytes;
        if more <= 0 {
            return true;
        }
        if !self.budget.take(more) {
            return false;
        }
        self.bytes += more;
        true
    }

    /// The pieces already read, followed by the rest of the body, streamed through: the pieces
    /// keep their share of the budget until each is handed to the client's connection (or the
    /// body is dropped), so a slow client cannot hold them outside it.
    pub fn stream_through<S>(mut self, pieces: Vec<Bytes>, rest: S) -> Body
    where
        S: futures_util::Stream<Item = Result<Bytes, axum::Error>> + Send + 'static,
    {
        let mut held = Held {
            filling: self.budget.filling.clone(),
            bytes: std::mem::take(&mut self.bytes),
        };
        let pieces = futures_util::stream::iter(pieces).map(move |piece| {
            held.give_back(piece.len());
            Ok(piece)
        });
        Body::from_stream(pieces.chain(rest))
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.filling.dec_by(self.bytes);
        }
    }
}

/// A reservation that left the fill with the pieces it covers, given back as they go out.
struct Held {
    filling: Gauge,
    bytes: i64,
}

impl Held {
    fn give_back(&mut self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX).min(self.bytes);
        if bytes > 0 {
            self.filling.dec_by(bytes);
            self.bytes -= bytes;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.filling.dec_by(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(budget: &FillBudget) -> i64 {
        budget.filling.get()
    }

    #[test]
    fn fills_share_the_budget_and_give_it_back_when_dropped() {
        let budget = FillBudget::new(100, Gauge::default());
        let mut first = budget.reserve();
        assert!(first.grow_to(60));
        assert!(first.grow_to(40), "a smaller total takes nothing");
        let mut second = budget.reserve();
        assert!(!second.grow_to(41), "no room: nothing taken");
        assert_eq!(held(&budget), 60);
        assert!(second.grow_to(40));
        assert_eq!(held(&budget), 100);
        drop(first);
        assert_eq!(held(&budget), 40);
        drop(second);
        assert_eq!(held(&budget), 0);
    }

    #[tokio::test]
    async fn pieces_streamed_through_give_back_their_share_as_they_go_out() {
        let budget = FillBudget::new(100, Gauge::default());
        let mut fill = budget.reserve();
        assert!(fill.grow_to(30));
        let pieces = vec![Bytes::from_static(&[1; 10]), Bytes::from_static(&[2; 20])];
        let rest = futures_util::stream::iter([Ok(Bytes::from_static(&[3; 5]))]);
        let mut stream = fill.stream_through(pieces, rest).into_data_stream();
        assert_eq!(held(&budget), 30, "kept while the pieces wait");
        assert_eq!(stream.next().await.unwrap().unwrap().len(), 10);
        assert_eq!(held(&budget), 20);
        assert_eq!(stream.next().await.unwrap().unwrap().len(), 20);
        assert_eq!(held(&budget), 0);
        assert_eq!(stream.next().await.unwrap().unwrap().len(), 5);
        assert!(stream.next().await.is_none());

        let mut fill = budget.reserve();
        assert!(fill.grow_to(10));
        let body = fill.stream_through(
            vec![Bytes::from_static(&[1; 10])],
            futures_util::stream::empty(),
        );
        drop(body);
        assert_eq!(held(&budget), 0, "given back when the client is gone");
    }
}
