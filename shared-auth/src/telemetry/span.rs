//! Our spans: a lean record per span (ids, kind, a name, times as nanoseconds, a few attributes
//! held inline, events and status) that the request path fills in and hands, when it ends, to the
//! batch queue ([`super::batch`]). The OpenTelemetry SDK's `Span`/`SpanData` cost ~10,000
//! instructions per proxied request on the request path alone (a `Context` map, a mutex per
//! attribute, a `String` per key, ~400-byte `SpanData` moved through a channel): this does the same
//! job with a few moves of a plain struct.
//!
//! Sampling follows the OpenTelemetry specification's samplers (`OTEL_TRACES_SAMPLER`):
//! a span that is not sampled is never recorded, but its ids still go upstream in `traceparent`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::pin::{Pin, pin};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use smallvec::SmallVec;

/// Most events a span keeps (the SDK's default limit); more are counted as dropped.
const MAX_EVENTS: usize = 128;

/// An attribute's value. Keys are `&'static str`: every key we set is a literal or a `tracing`
/// field name.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Static(&'static str),
    Text(String),
    /// A text many spans carry (a replica's address): shared, not copied per span.
    Shared(Arc<str>),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(text: &'static str) -> Self {
        Value::Static(text)
    }
}

impl From<Cow<'static, str>> for Value {
    fn from(text: Cow<'static, str>) -> Self {
        match text {
            Cow::Borrowed(text) => Value::Static(text),
            Cow::Owned(text) => Value::Text(text),
        }
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::Text(text)
    }
}

impl Value {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Static(text) => Some(text),
            Value::Text(text) => Some(text),
            Value::Shared(text) => Some(text),
            _ => None,
        }
    }
}

/// A span's attributes, inline: our spans have at most four.
pub(crate) type Attributes = SmallVec<[(&'static str, Value); 4]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Server,
    Client,
}

/// A logged warning or error, as an event of the request's span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub time: u64,
    pub name: String,
    pub attributes: Vec<(&'static str, Value)>,
}

/// What a span carries to its children and upstream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    /// The W3C `tracestate` of the trace, validated, when the caller sent one.
    pub trace_state: Option<Arc<str>>,
}

/// One span, as exported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanRecord {
    pub context: SpanContext,
    pub parent_span_id: Option<[u8; 8]>,
    /// Whether the parent came from another process (`traceparent`).
    pub parent_is_remote: bool,
    pub kind: Kind,
    pub name: Cow<'static, str>,
    /// Nanoseconds since the Unix epoch.
    pub start: u64,
    pub end: u64,
    pub attributes: Attributes,
    pub events: Vec<Event>,
    pub dropped_events: u32,
    /// `Some` marks the span failed (OTLP status code 2), with this description.
    pub error: Option<Cow<'static, str>>,
}

pub(crate) fn now_nanos() -> u64 {
    nanos(SystemTime::now())
}

pub(crate) fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

/// What spans need while they are exported: the sampler, and where an ended span goes (the
/// batch queue, given as a function: the queue holds spans, so this module does not name it).
pub(crate) struct Tracer {
    pub(crate) sampler: Sampler,
    pub(crate) export: Box<dyn Fn(SpanRecord) + Send + Sync>,
}

/// The tracer of the process, set once spans are exported: without it no span is built.
pub(crate) static TRACER: OnceLock<Tracer> = OnceLock::new();

impl SpanRecord {
    /// A span starting now under `parent` (the request's span or a caller's `traceparent`), or as
    /// the root of a new trace. The sampler decides whether it will be exported.
    pub(crate) fn start(
        parent: Option<(&SpanContext, bool)>,
        kind: Kind,
        name: Cow<'static, str>,
        attributes: Attributes,
    ) -> Option<SpanRecord> {
        let tracer = TRACER.get()?;
        let trace_id = parent.map_or_else(new_trace_id, |(parent, _)| parent.trace_id);
        let sampled = tracer
            .sampler
            .sampled(&trace_id, parent.map(|(parent, _)| parent.sampled));
        Some(SpanRecord {
            context: SpanContext {
                trace_id,
                span_id: new_span_id(),
                sampled,
                trace_state: parent.and_then(|(parent, _)| parent.trace_state.clone()),
            },
            parent_span_id: parent.map(|(parent, _)| parent.span_id),
            parent_is_remote: parent.is_some_and(|(_, remote)| remote),
            kind,
            name,
            start: now_nanos(),
            end: 0,
            attributes,
            events: Vec::new(),
            dropped_events: 0,
            error: None,
        })
    }

    /// Ends the span now (unless its end was set) and queues it for export when sampled.
    pub(crate) fn finish(mut self) {
        if !self.context.sampled {
            return;
        }
        if self.end == 0 {
            self.end = now_nanos();
        }
        if let Some(tracer) = TRACER.get() {
            (tracer.export)(self);
        }
    }

    /// Adds a logged warning or error; an error also marks the span failed.
    pub(crate) fn add_event(&mut self, event: Event, is_error: bool) {
        if is_error && self.error.is_none() {
            self.error = Some(Cow::Borrowed(""));
        }
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.dropped_events += 1;
        }
    }
}

/// Random ids, never all zeros (invalid in W3C Trace Context). Not secret: unique is enough.
fn new_trace_id() -> [u8; 16] {
    fastrand::u128(1..).to_be_bytes()
}

fn new_span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

/// `OTEL_TRACES_SAMPLER`: whether a span is sampled, from its trace id and its parent's decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    /// Follow the parent's decision when there is a parent (`parentbased_*`).
    parent_based: bool,
    /// The share of new traces sampled (`always_on` is 1, `always_off` 0).
    ratio: f64,
}

impl Sampler {
    /// The sampler the standard variables name; the default, and the answer to an unknown name,
    /// is `parentbased_always_on`, as in the OpenTelemetry SDK.
    pub(crate) fn from_env() -> Sampler {
        let name = std::env::var("OTEL_TRACES_SAMPLER").unwrap_or_default();
        let arg = std::env::var("OTEL_TRACES_SAMPLER_ARG").ok();
        Self::named(name.trim(), arg.as_deref())
    }

    fn named(name: &str, arg: Option<&str>) -> Sampler {
        // A missing or unreadable ratio samples everything, as the SDK does.
        let ratio = || {
            arg.and_then(|arg| arg.trim().parse::<f64>().ok())
                .filter(|ratio| !ratio.is_nan())
                .unwrap_or(1.0)
        };
        let (parent_based, ratio) = match name {
            "always_on" => (false, 1.0),
            "always_off" => (false, 0.0),
            "traceidratio" => (false, ratio()),
            "parentbased_always_off" => (true, 0.0),
            "parentbased_traceidratio" => (true, ratio()),
            "" | "parentbased_always_on" => (true, 1.0),
            other => {
                eprintln!(
                    "OTEL_TRACES_SAMPLER={other} is not supported; using parentbased_always_on"
                );
                (true, 1.0)
            }
        };
        Sampler {
            parent_based,
            ratio,
        }
    }

    pub(crate) fn sampled(&self, trace_id: &[u8; 16], parent_sampled: Option<bool>) -> bool {
        match parent_sampled {
            Some(parent) if self.parent_based => parent,
            _ => self.ratio_samples(trace_id),
        }
    }

    /// The SDK's `TraceIdRatioBased`: the trace id's low 63 bits below ratio × 2^63, so every
    /// process decides alike for one trace.
    fn ratio_samples(&self, trace_id: &[u8; 16]) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        let bound = (self.ratio.max(0.0) * (1_u64 << 63) as f64) as u64;
        let mut low = [0_u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        (u64::from_be_bytes(low) >> 1) < bound
    }
}

/// A request's work inside its server span.
pub(crate) type Scoped<F> = tokio::task::futures::TaskLocalFuture<RefCell<Box<SpanRecord>>, F>;

tokio::task_local! {
    /// The server span of the request a task is serving, while spans are exported: the parent of
    /// the spans made inside it, and where warnings and errors logged inside it go.
    static REQUEST_SPAN: RefCell<Box<SpanRecord>>;
}

/// The request's span context, for a child span (`false`: a local parent).
fn request_context() -> Option<SpanContext> {
    REQUEST_SPAN
        .try_with(|span| span.try_borrow().ok().map(|span| span.context.clone()))
        .ok()
        .flatten()
}

/// Runs `change` on the span of the request the task is serving, if any.
pub(crate) fn with_request_span(change: impl FnOnce(&mut SpanRecord)) {
    let _ = REQUEST_SPAN.try_with(|span| {
        if let Ok(mut span) = span.try_borrow_mut() {
            change(&mut span);
        }
    });
}

/// Renames the span of the request the task is serving (while spans are exported), for a router
/// that matches after the span started: the gateway's route table. `name` must come from a
/// bounded set (`GET /v1/news/articles/{p3}`, never the raw path).
pub fn name_request_span(name: &str) {
    with_request_span(|span| span.name = Cow::Owned(name.to_owned()));
}

/// A child of the request's span (or a new trace's root, outside a request), queued when it ends
/// if sampled.
pub(crate) fn child_span(
    kind: Kind,
    name: Cow<'static, str>,
    attributes: Attributes,
) -> Option<SpanRecord> {
    let parent = request_context();
    SpanRecord::start(
        parent.as_ref().map(|parent| (parent, false)),
        kind,
        name,
        attributes,
    )
}

/// The server span of one request (kind server, a child of the caller's `traceparent` when there
/// is one), while spans are exported. The request is served inside it ([`ServerSpan::run`]).
/// Boxed: the request's future moves it a dozen times (into the task-local and back), and each
/// move of the ~350-byte record was a `memcpy`.
pub struct ServerSpan {
    record: Box<SpanRecord>,
}

impl ServerSpan {
    /// Starts the span named `name` with `attributes` (at most four are kept inline; more
    /// allocate); `None` when spans are not exported.
    pub fn start(
        headers: &HeaderMap,
        name: Cow<'static, str>,
        attributes: impl IntoIterator<Item = (&'static str, Value)>,
    ) -> Option<ServerSpan> {
        let parent = extract(headers);
        let record = SpanRecord::start(
            parent.as_ref().map(|parent| (parent, true)),
            Kind::Server,
            name,
            attributes.into_iter().collect(),
        )?;
        Some(ServerSpan {
            record: Box::new(record),
        })
    }

    /// `work` with this span as the task's request span. Awaited pinned where it is made
    /// (not inside another `async fn`, which would move the request's whole future once more);
    /// [`ServerSpan::after`] then gives the span back with the events added to it meanwhile.
    pub(crate) fn scope<F: Future>(self, work: F) -> Scoped<F> {
        REQUEST_SPAN.scope(RefCell::new(self.record), work)
    }

    /// The span back from its finished scope.
    pub(crate) fn after<F: Future>(scoped: Pin<&mut Scoped<F>>) -> Option<ServerSpan> {
        let record = scoped.take_value()?.into_inner();
        Some(ServerSpan { record })
    }

    /// Runs `work` with this span as the task's request span; gives the span back with the
    /// events that were added to it meanwhile.
    pub async fn run<F: Future>(self, work: F) -> (F::Output, Option<ServerSpan>) {
        let mut scoped = pin!(self.scope(work));
        let output = scoped.as_mut().await;
        (output, Self::after(scoped))
    }

    #[cfg(test)]
    pub(crate) fn of_record(record: SpanRecord) -> ServerSpan {
        ServerSpan {
            record: Box::new(record),
        }
    }

    #[cfg(test)]
    pub(crate) fn record(&self) -> &SpanRecord {
        &self.record
    }

    /// The trace id, as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> [u8; 32] {
        let mut hex = [0_u8; 32];
        write_hex(&mut hex, &self.record.context.trace_id);
        hex
    }

    /// Ends the span with the status code of the answer.
    pub fn end(mut self, status: u16) {
        self.record
            .attributes
            .push(("http.response.status_code", Value::Int(status.into())));
        (*self.record).finish();
    }
}

/// The client span of one call to another service (kind client, named by its method), a child
/// of the task's request span, while spans are exported. Its context goes upstream with
/// [`ClientSpan::inject`]; it ends when dropped, as an error if no answer was recorded.
pub struct ClientSpan {
    record: Option<SpanRecord>,
    answered: bool,
}

impl ClientSpan {
    /// Starts the span; `None` when spans are not exported.
    pub fn start(
        method: &Method,
        attributes: impl IntoIterator<Item = (&'static str, Value)>,
    ) -> Option<ClientSpan> {
        let record = child_span(
            Kind::Client,
            method_name(method),
            attributes.into_iter().collect(),
        )?;
        Some(ClientSpan {
            record: Some(record),
            answered: false,
        })
    }

    /// Writes the span's context into the outgoing headers: `traceparent`, and `tracestate` when
    /// the trace carries one (W3C Trace Context).
    pub fn inject(&self, headers: &mut HeaderMap) {
        if let Some(record) = &self.record {
            inject(&record.context, headers);
        }
    }

    /// Records the status code of the answer.
    pub fn answered(&mut self, status: u16) {
        self.answered = true;
        if let Some(record) = &mut self.record {
            record
                .attributes
                .push(("http.response.status_code", Value::Int(status.into())));
        }
    }
}

impl Drop for ClientSpan {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            if !self.answered {
                record.error = Some(Cow::Borrowed("no answer"));
            }
            record.finish();
        }
    }
}

/// The standard methods' names without an allocation.
pub(crate) fn method_name(method: &Method) -> Cow<'static, str> {
    match *method {
        Method::GET => "GET".into(),
        Method::POST => "POST".into(),
        Method::PUT => "PUT".into(),
        Method::PATCH => "PATCH".into(),
        Method::DELETE => "DELETE".into(),
        Method::HEAD => "HEAD".into(),
        Method::OPTIONS => "OPTIONS".into(),
        _ => method.as_str().to_owned().into(),
    }
}

static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The caller's trace context from `traceparent` (and `tracestate`), read as the OpenTelemetry
/// SDK's W3C propagator reads them: an invalid `traceparent` starts a new trace, an invalid
/// `tracestate` is ignored.
pub(crate) fn extract(headers: &HeaderMap) -> Option<SpanContext> {
    let traceparent = headers.get(&TRACEPARENT)?.to_str().ok()?;
    let (trace_id, span_id, sampled) = parse_traceparent(traceparent.trim())?;
    let trace_state = headers
        .get(&TRACESTATE)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<opentelemetry::trace::TraceState>().ok())
        .map(|state| state.header())
        .filter(|header| !header.is_empty())
        .map(Arc::from);
    Some(SpanContext {
        trace_id,
        span_id,
        sampled,
        trace_state,
    })
}

/// `version-traceid-parentid-flags`: lower-case hex, ids not all zeros, version `ff` invalid,
/// version 00 exactly four parts with flags at most 2 (later versions may append parts).
fn parse_traceparent(text: &str) -> Option<([u8; 16], [u8; 8], bool)> {
    let parts: SmallVec<[&str; 5]> = text.split_terminator('-').collect();
    let [version, trace_id, span_id, flags, ..] = parts.as_slice() else {
        return None;
    };
    if version.len() != 2 {
        return None;
    }
    let version = u8::from_str_radix(version, 16).ok()?;
    if version == 0xff || (version == 0 && parts.len() != 4) {
        return None;
    }
    let trace_id: [u8; 16] = parse_hex(trace_id)?;
    let span_id: [u8; 8] = parse_hex(span_id)?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if (version == 0 && flags > 2) || trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some((trace_id, span_id, flags & 1 == 1))
}

/// `N` bytes from exactly 2N lower-case hex digits.
fn parse_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |digit: u8| match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    };
    let mut out = [0_u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// Writes `traceparent` (version 00) and `tracestate` for a span with this context.
fn inject(context: &SpanContext, headers: &mut HeaderMap) {
    let mut traceparent = [0_u8; 55];
    traceparent[..3].copy_from_slice(b"00-");
    write_hex(&mut traceparent[3..35], &context.trace_id);
    traceparent[35] = b'-';
    write_hex(&mut traceparent[36..52], &context.span_id);
    traceparent[52] = b'-';
    write_hex(&mut traceparent[53..55], &[u8::from(context.sampled)]);
    if let Ok(value) = HeaderValue::from_bytes(&traceparent) {
        headers.insert(&TRACEPARENT, value);
    }
    if let Some(state) = &context.trace_state
        && let Ok(value) = HeaderValue::from_str(state)
    {
        headers.insert(&TRACESTATE, value);
    }
}

/// Lower-case hex of `bytes` into `out` (twice as long).
fn write_hex(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(traceparent: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(&TRACEPARENT, HeaderValue::from_str(traceparent).unwrap());
        headers
    }

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_the_same() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = extract(&headers(text)).unwrap();
        assert!(context.sampled);
        let mut out = HeaderMap::new();
        inject(&context, &mut out);
        assert_eq!(out[&TRACEPARENT], text);
        assert!(out.get(&TRACESTATE).is_none());
    }

    #[test]
    fn invalid_traceparents_start_a_new_trace() {
        for text in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(extract(&headers(text)), None, "{text}");
        }
        // A later version may carry more parts.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        assert!(!extract(&headers(later)).unwrap().sampled);
    }

    #[test]
    fn a_valid_tracestate_goes_on_and_an_invalid_one_is_dropped() {
        let mut with_state = headers("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        with_state.insert(&TRACESTATE, HeaderValue::from_static("vendor=abc,other=x"));
        let context = extract(&with_state).unwrap();
        assert_eq!(context.trace_state.as_deref(), Some("vendor=abc,other=x"));
        let mut out = HeaderMap::new();
        inject(&context, &mut out);
        assert_eq!(out[&TRACESTATE], "vendor=abc,other=x");

        with_state.insert(&TRACESTATE, HeaderValue::from_static("no equals sign"));
        assert_eq!(extract(&with_state).unwrap().trace_state, None);
    }

    #[test]
    fn samplers_follow_the_parent_or_the_trace_id() {
        let low = [0_u8; 16];
        let high = [0xff_u8; 16];
        let default = Sampler::named("", None);
        assert!(default.sampled(&high, None));
        assert!(!default.sampled(&low, Some(false)));
        let ratio = Sampler::named("parentbased_traceidratio", Some("0.5"));
        assert!(ratio.sampled(&low, None));
        assert!(!ratio.sampled(&high, None));
        assert!(ratio.sampled(&high, Some(true)));
        assert!(!Sampler::named("parentbased_traceidratio", Some("0")).sampled(&low, None));
        let plain = Sampler::named("traceidratio", Some("0.5"));
        assert!(!plain.sampled(&high, Some(true)), "ignores the parent");
        assert!(Sampler::named("always_on", None).sampled(&low, Some(false)));
        assert!(!Sampler::named("always_off", None).sampled(&low, Some(true)));
        assert!(!Sampler::named("parentbased_always_off", None).sampled(&low, None));
        assert!(Sampler::named("traceidratio", Some("nonsense")).sampled(&high, None));
    }
}

/// A plain server span for the other modules' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub(crate) fn record() -> SpanRecord {
        let start = 1_764_000_000_123_456_789;
        SpanRecord {
            context: SpanContext {
                trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128.to_be_bytes(),
                span_id: 0x00f0_67aa_0ba9_02b7_u64.to_be_bytes(),
                sampled: true,
                trace_state: None,
            },
            parent_span_id: None,
            parent_is_remote: false,
            kind: Kind::Server,
            name: Cow::Borrowed("GET /v1/lingo/languages"),
            start,
            end: start + 1_234_000,
            attributes: [("http.request.method", Value::Static("GET"))]
                .into_iter()
                .collect(),
            events: Vec::new(),
            dropped_events: 0,
            error: None,
        }
    }
}
