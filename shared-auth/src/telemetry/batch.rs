//! Ended spans wait in a bounded queue until one exporter task encodes them in batches and sends
//! them ([`super::otlp_http`]), off the request path. A span that finds the queue full is dropped
//! and counted, never waited for. The queue is a `Vec` behind a mutex that the exporter swaps with
//! an empty one of the same capacity: pushing a span is a lock and a move, and in steady state no
//! side allocates.
//!
//! The schedule and limits are the standard batch span processor's variables:
//! `OTEL_BSP_SCHEDULE_DELAY` (ms, 5000), `OTEL_BSP_MAX_QUEUE_SIZE` (2048) and
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512, at most the queue size).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::otlp_http::OtlpHttpExporter;
use super::span::SpanRecord;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchConfig {
    pub delay: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
}

impl BatchConfig {
    /// The OTEL_BSP_* variables, with the specification's defaults.
    pub(crate) fn from_env() -> BatchConfig {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|value| value.trim().parse::<u64>().ok())
        };
        let delay = number("OTEL_BSP_SCHEDULE_DELAY").unwrap_or(5000);
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE").unwrap_or(2048) as usize;
        let max_batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").unwrap_or(512) as usize;
        BatchConfig {
            delay: Duration::from_millis(delay),
            max_queue: max_queue.max(1),
            max_batch: max_batch.clamp(1, max_queue.max(1)),
        }
    }
}

pub(crate) struct SpanQueue {
    spans: Mutex<Vec<SpanRecord>>,
    config: BatchConfig,
    dropped: AtomicU64,
    /// Wakes the exporter early: a full batch is waiting, or the process is shutting down.
    wake: Notify,
    closing: AtomicBool,
}

impl SpanQueue {
    pub(crate) fn new(config: BatchConfig) -> SpanQueue {
        SpanQueue {
            spans: Mutex::new(Vec::with_capacity(config.max_batch)),
            config,
            dropped: AtomicU64::new(0),
            wake: Notify::new(),
            closing: AtomicBool::new(false),
        }
    }

    fn spans(&self) -> MutexGuard<'_, Vec<SpanRecord>> {
        // A panic while holding the lock leaves a valid Vec: keep using it.
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, span: SpanRecord) {
        let mut spans = self.spans();
        if spans.len() >= self.config.max_queue {
            drop(spans);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        spans.push(span);
        let batch_ready = spans.len() == self.config.max_batch;
        drop(spans);
        if batch_ready {
            self.wake.notify_one();
        }
    }

    /// Moves every queued span into `batch` (empty), leaving the queue `batch`'s capacity.
    fn take_into(&self, batch: &mut Vec<SpanRecord>) {
        std::mem::swap(&mut *self.spans(), batch);
    }

    /// Asks the exporter task to send what is queued and stop.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// The exporter task: every `delay`, or as soon as a batch is full, sends what is queued in
/// batches of at most `max_batch` spans; after [`SpanQueue::close`] it sends the rest and ends.
pub(crate) async fn export_loop(queue: Arc<SpanQueue>, exporter: OtlpHttpExporter) {
    let mut batch = Vec::with_capacity(queue.config.max_batch);
    let mut failing = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(queue.config.delay) => {}
            () = queue.wake.notified() => {}
        }
        // Read before taking the spans, so none queued before `close` is left behind.
        let closing = queue.closing.load(Ordering::Acquire);
        queue.take_into(&mut batch);
        for chunk in batch.chunks(queue.config.max_batch) {
            let result = exporter.export(chunk).await;
            failing = report(result, failing);
        }
        batch.clear();
        let dropped = queue.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "the span queue was full: spans dropped");
        }
        if closing {
            return;
        }
    }
}

/// Logs the first failure of a run of failed exports and the recovery, not every attempt (the
/// collector may be down for a while). Returns whether exports are failing now.
fn report(result: Result<(), String>, was_failing: bool) -> bool {
    match result {
        Ok(()) if was_failing => {
            tracing::info!("exporting spans works again");
            false
        }
        Ok(()) => false,
        Err(error) if !was_failing => {
            tracing::warn!(
                error,
                "exporting spans failed (spans of the batch are lost)"
            );
            true
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts() {
        let queue = SpanQueue::new(BatchConfig {
            delay: Duration::from_secs(1),
            max_queue: 2,
            max_batch: 2,
        });
        for _ in 0..3 {
            queue.push(crate::telemetry::span::tests_support::record());
        }
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 1);
        let mut batch = Vec::new();
        queue.take_into(&mut batch);
        assert_eq!(batch.len(), 2);
        assert!(queue.spans().is_empty());
    }
}
