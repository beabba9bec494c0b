//! Logging, tracing and shutdown signals shared by the three binaries.
//!
//! Every binary installs one subscriber: log lines (human or JSON), and OpenTelemetry spans only
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Without an
//! endpoint no OpenTelemetry span is built at all (nothing would collect it): log lines and request
//! ids stay, and a client's `traceparent` is passed on unchanged. With one, the standard
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` choose the sampler (default
//! `parentbased_always_on`; `parentbased_traceidratio` with a ratio for busy systems); a trace the
//! sampler drops is not exported but its context still goes upstream.
//!
//! The spans are built with the OpenTelemetry SDK directly, not from `tracing` spans: a request's
//! server span ([`ServerSpan`]), the gateway's client span per upstream attempt ([`ClientSpan`]),
//! and a client span per SQL statement, which [`TraceEvents`] makes from the event sqlx reports
//! (in this one place, without touching any query). The request's span is the task's current
//! trace context while the request is served (a task-local, like the request id), so the spans
//! made inside it are its children and warnings and errors logged inside it become its events.
//! A `tracing` span per request stays for the log lines (request id, trace id), as it is without
//! an exporter; going through `tracing-opentelemetry` instead cost ~45,000 instructions per
//! proxied request (a layer call and registry lookup at every poll, every field copied through a
//! formatter).

mod otlp_http;
mod otlp_proto;

use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use clap::ValueEnum;
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, TraceFlags, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, SdkTracer, SdkTracerProvider};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Readable lines for a terminal.
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Keeps the tracer provider alive; call [`Telemetry::shutdown`] before exiting to flush spans.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Flushes the spans still queued. The flush blocks while the exporter task runs on the
    /// runtime, so it runs on a blocking thread rather than on a runtime worker.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(error)) = flushed {
            eprintln!("flushing spans failed: {error}");
        }
    }
}

/// The tracer of the process, set once spans are exported: without it no span is built.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether OpenTelemetry spans leave this process (an OTLP endpoint is configured).
pub fn exporting() -> bool {
    TRACER.get().is_some()
}

tokio::task_local! {
    /// The trace context (the server span) of the request a task is serving, while spans are
    /// exported.
    static TRACE: Context;
}

/// Set when log lines can show a request's trace id: spans are exported, and the log filter lets
/// our (INFO) spans into log lines.
static LOGS_TRACE_IDS: AtomicBool = AtomicBool::new(false);

/// Whether a request span should carry its trace id for the log lines inside it.
pub fn logs_trace_ids() -> bool {
    LOGS_TRACE_IDS.load(Ordering::Relaxed)
}

fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()))
}

/// Where spans go: the standard OTLP environment variables, or an explicit traces URL (tests).
enum Export {
    FromEnvironment,
    To { traces_url: String, delay: Duration },
}

fn tracer_provider(service_name: &'static str, export: Export) -> SdkTracerProvider {
    let resource = Resource::builder().with_service_name(service_name).build();
    let builder = SdkTracerProvider::builder().with_resource(resource.clone());
    // BatchConfigBuilder reads OTEL_BSP_* (queue size, batch size, delay) itself.
    let (traces_url, config) = match export {
        Export::FromEnvironment if !otlp_configured() => return builder.build(),
        Export::FromEnvironment => (None, BatchConfigBuilder::default().build()),
        Export::To { traces_url, delay } => (
            Some(traces_url),
            BatchConfigBuilder::default()
                .with_scheduled_delay(delay)
                .build(),
        ),
    };
    let exporter = otlp_http::OtlpHttpExporter::new(traces_url, &resource);
    // Spans are queued on the request path and encoded and sent in batches by a task on the
    // tokio runtime (the binaries call this from `#[tokio::main]`), off the request path.
    let processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio)
        .with_batch_config(config)
        .build();
    builder.with_span_processor(processor).build()
}

/// Installs the global subscriber for `service_name`. `RUST_LOG` filters log lines (default
/// `info`); spans are exported when OTLP is configured. Must run inside a tokio runtime.
pub fn init(service_name: &'static str, format: LogFormat) -> Telemetry {
    install(service_name, format, Export::FromEnvironment)
}

/// Like [`init`], exporting spans to `traces_url` (an OTLP/HTTP `/v1/traces` URL) every `delay`.
pub fn init_exporting_to(
    service_name: &'static str,
    format: LogFormat,
    traces_url: String,
    delay: Duration,
) -> Telemetry {
    install(service_name, format, Export::To { traces_url, delay })
}

fn install(service_name: &'static str, format: LogFormat, export: Export) -> Telemetry {
    global::set_text_map_propagator(TraceContextPropagator::new());
    let exports = match export {
        Export::FromEnvironment => otlp_configured(),
        Export::To { .. } => true,
    };
    let provider = tracer_provider(service_name, export);
    let tracer = provider.tracer(service_name);
    global::set_tracer_provider(provider.clone());

    let log_filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,hyper=warn,reqwest=warn,h2=warn"));
    // Our spans are at INFO: below that level no log line lists them, or their trace id.
    let logs_spans = log_filter
        .max_level_hint()
        .is_none_or(|level| level >= tracing::Level::INFO);
    let log_layer = match format {
        // Colours only on a terminal: a log file or pipe gets plain text.
        LogFormat::Human => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .boxed(),
    };
    // sqlx reports each finished statement at DEBUG on target `sqlx::query`; warnings and errors
    // of any target become events of the request's span.
    let trace_layer = exports.then(|| {
        TraceEvents {
            tracer: tracer.clone(),
        }
        .with_filter(
            Targets::new()
                .with_default(tracing::Level::WARN)
                .with_target("sqlx::query", tracing::Level::DEBUG),
        )
    });

    let installed = tracing_subscriber::registry()
        .with(log_layer.with_filter(log_filter))
        .with(trace_layer)
        .try_init();
    if installed.is_ok() {
        if exports {
            let _ = TRACER.set(tracer);
        }
        LOGS_TRACE_IDS.store(exports && logs_spans, Ordering::Relaxed);
    }
    Telemetry { provider }
}

/// Logging only, without spans (tools and tests).
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,hyper=warn,reqwest=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Human => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}

/// The trace context a request arrived with (`traceparent`), to parent its server span on.
fn extract_context(headers: &HeaderMap) -> Context {
    global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}

/// The server span of one request (kind server, a child of the caller's `traceparent` when there
/// is one), while spans are exported. The request is served inside it ([`ServerSpan::run`]).
pub struct ServerSpan {
    context: Context,
}

impl ServerSpan {
    /// Starts the span named `name` with `attributes`; `None` when spans are not exported.
    pub fn start(
        headers: &HeaderMap,
        name: String,
        attributes: Vec<KeyValue>,
    ) -> Option<ServerSpan> {
        let tracer = TRACER.get()?;
        let parent = extract_context(headers);
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Some(ServerSpan {
            context: parent.with_span(span),
        })
    }

    /// Runs `work` with this span as the task's trace context.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        TRACE.scope(self.context.clone(), work).await
    }

    /// The trace id, as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> [u8; 32] {
        let mut hex = [0_u8; 32];
        write_hex(
            &mut hex,
            &self.context.span().span_context().trace_id().to_bytes(),
        );
        hex
    }

    /// Ends the span with the status code of the answer.
    pub fn end(self, status: u16) {
        let span = self.context.span();
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        span.end();
    }
}

/// The client span of one call to another service (kind client, named by its method), a child
/// of the task's request span, while spans are exported. Its context goes upstream with
/// [`ClientSpan::inject`]; it ends when dropped, as an error if no answer was recorded.
pub struct ClientSpan {
    context: Context,
    answered: bool,
}

impl ClientSpan {
    /// Starts the span; `None` when spans are not exported.
    pub fn start(method: &Method, attributes: &[(&'static str, &str)]) -> Option<ClientSpan> {
        let tracer = TRACER.get()?;
        let parent = TRACE.try_with(Context::clone).unwrap_or_default();
        let span = tracer
            .span_builder(method_name(method))
            .with_kind(SpanKind::Client)
            .with_attributes(
                attributes
                    .iter()
                    .map(|(key, value)| KeyValue::new(*key, (*value).to_owned())),
            )
            .start_with_context(tracer, &parent);
        Some(ClientSpan {
            context: parent.with_span(span),
            answered: false,
        })
    }

    /// Writes the span's context into the outgoing headers: `traceparent`, and `tracestate` when
    /// the trace carries one (W3C Trace Context, as the SDK's propagator writes them).
    pub fn inject(&self, headers: &mut HeaderMap) {
        inject(&self.context, headers);
    }

    /// Records the status code of the answer.
    pub fn answered(&mut self, status: u16) {
        self.answered = true;
        self.context.span().set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
    }
}

impl Drop for ClientSpan {
    fn drop(&mut self) {
        let span = self.context.span();
        if !self.answered {
            span.set_status(Status::error("no answer"));
        }
        span.end();
    }
}

/// The standard methods' names without an allocation.
fn method_name(method: &Method) -> std::borrow::Cow<'static, str> {
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

fn inject(context: &Context, headers: &mut HeaderMap) {
    let span_ref = context.span();
    let span_context = span_ref.span_context();
    if !span_context.is_valid() {
        return;
    }
    let mut traceparent = [0_u8; 55];
    traceparent[..3].copy_from_slice(b"00-");
    write_hex(&mut traceparent[3..35], &span_context.trace_id().to_bytes());
    traceparent[35] = b'-';
    write_hex(&mut traceparent[36..52], &span_context.span_id().to_bytes());
    traceparent[52] = b'-';
    write_hex(
        &mut traceparent[53..55],
        &[span_context.trace_flags().to_u8() & TraceFlags::SAMPLED.to_u8()],
    );
    if let Ok(value) = HeaderValue::from_bytes(&traceparent) {
        headers.insert(&TRACEPARENT, value);
    }
    let state = span_context.trace_state();
    if *state != TraceState::NONE
        && let Ok(value) = HeaderValue::from_str(&state.header())
    {
        headers.insert(&TRACESTATE, value);
    }
}

static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Lower-case hex of `bytes` into `out` (twice as long).
fn write_hex(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

/// Turns each finished SQL statement that sqlx reports into a client span under the task's
/// request span, named by its operation, with `db.system` and the statement summary
/// (placeholders only: the parameter values are never part of it); and each warning or error
/// logged while a request is served into an event of its span (an error also marks the span as
/// failed).
struct TraceEvents {
    tracer: SdkTracer,
}

#[derive(Default)]
struct SqlEvent {
    summary: Option<String>,
    elapsed_secs: Option<f64>,
    rows_returned: Option<u64>,
}

impl Visit for SqlEvent {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "summary" {
            self.summary = Some(value.to_owned());
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed_secs = Some(value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "rows_returned" {
            self.rows_returned = Some(value);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// A logged event as a span event: its message as the name, its other fields as attributes.
#[derive(Default)]
struct SpanEvent {
    message: String,
    attributes: Vec<KeyValue>,
}

impl Visit for SpanEvent {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.attributes
            .push(KeyValue::new(field.name(), value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.attributes
            .push(KeyValue::new(field.name(), value as i64));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.attributes.push(KeyValue::new(field.name(), text));
        }
    }
}

impl TraceEvents {
    fn sql_span(&self, event: &Event<'_>) {
        let mut sql = SqlEvent::default();
        event.record(&mut sql);
        let Some(summary) = sql.summary else { return };
        let operation = summary
            .split_whitespace()
            .next()
            .unwrap_or("SQL")
            .to_ascii_uppercase();
        let end = SystemTime::now();
        let start = end - Duration::from_secs_f64(sql.elapsed_secs.unwrap_or_default().max(0.0));
        let parent = TRACE.try_with(Context::clone).unwrap_or_default();
        let mut span = self
            .tracer
            .span_builder(format!("{operation} postgresql"))
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes([
                KeyValue::new("db.system", "postgresql"),
                KeyValue::new("db.operation", operation),
                KeyValue::new(
                    "db.query.summary",
                    summary.trim_end_matches(" …").to_owned(),
                ),
                KeyValue::new(
                    "db.rows_returned",
                    sql.rows_returned.unwrap_or_default() as i64,
                ),
            ])
            .start_with_context(&self.tracer, &parent);
        span.end_with_timestamp(end);
    }

    fn span_event(event: &Event<'_>) {
        let metadata = event.metadata();
        let _ = TRACE.try_with(|context| {
            let mut fields = SpanEvent::default();
            event.record(&mut fields);
            fields
                .attributes
                .push(KeyValue::new("level", metadata.level().as_str()));
            fields
                .attributes
                .push(KeyValue::new("target", metadata.target()));
            let span = context.span();
            if *metadata.level() == tracing::Level::ERROR {
                span.set_status(Status::error(""));
            }
            span.add_event(fields.message, fields.attributes);
        });
    }
}

impl<S> Layer<S> for TraceEvents
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
        if event.metadata().target() == "sqlx::query" {
            self.sql_span(event);
        } else if *event.metadata().level() <= tracing::Level::WARN {
            Self::span_event(event);
        }
    }
}

/// Resolves on SIGINT or SIGTERM: the signal to stop accepting and drain in-flight requests.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}
