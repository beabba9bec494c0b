//! Logging, tracing and shutdown signals shared by the three binaries.
//!
//! Every binary installs one subscriber: log lines (human or JSON), and OpenTelemetry spans only
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Without an
//! endpoint no OpenTelemetry span is built at all (nothing would collect it): log lines and request
//! ids stay, and a client's `traceparent` is passed on unchanged. With one, the standard
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` choose the sampler (default
//! `parentbased_always_on`; `parentbased_traceidratio` with a ratio for busy systems); a trace the
//! sampler drops is not exported but its context still goes upstream.
//! SQL statements become client spans through [`SqlSpans`], in this one place, without touching
//! any query.

mod otlp_http;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use axum::http::HeaderMap;
use clap::ValueEnum;
use opentelemetry::trace::{
    Span as _, SpanKind, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, SdkTracer, SdkTracerProvider};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
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

/// Set once spans are exported: callers skip building spans nobody collects.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether OpenTelemetry spans leave this process (an OTLP endpoint is configured).
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
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
    let mut builder = SdkTracerProvider::builder().with_resource(resource);
    let (exporter, config) = match export {
        Export::FromEnvironment if !otlp_configured() => return builder.build(),
        // Reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT and OTEL_BSP_* itself.
        Export::FromEnvironment => (
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(otlp_http::OtlpHttpClient::new())
                .build(),
            BatchConfigBuilder::default().build(),
        ),
        Export::To { traces_url, delay } => (
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(otlp_http::OtlpHttpClient::new())
                .with_endpoint(traces_url)
                .build(),
            BatchConfigBuilder::default()
                .with_scheduled_delay(delay)
                .build(),
        ),
    };
    match exporter {
        // Exports run on the tokio runtime; the binaries call this from `#[tokio::main]`.
        Ok(exporter) => {
            let processor =
                BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio)
                    .with_batch_config(config)
                    .build();
            builder = builder.with_span_processor(processor);
        }
        Err(error) => eprintln!("OTLP exporter not started: {error}"),
    }
    builder.build()
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
    // Our own spans (request, upstream, ...) become OpenTelemetry spans; library internals do not.
    let span_filter = Targets::new()
        .with_default(tracing::Level::INFO)
        .with_target("h2", tracing::level_filters::LevelFilter::OFF)
        .with_target("hyper", tracing::level_filters::LevelFilter::OFF)
        .with_target("hyper_util", tracing::level_filters::LevelFilter::OFF)
        .with_target("tower", tracing::level_filters::LevelFilter::OFF)
        .with_target("sqlx", tracing::level_filters::LevelFilter::OFF)
        .with_target("reqwest", tracing::level_filters::LevelFilter::OFF);
    // Without an exporter these layers are left out entirely: no span data per request.
    let otel_layer = exports.then(|| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer.clone())
            .with_filter(span_filter)
    });
    // sqlx reports each finished statement at DEBUG on target `sqlx::query`.
    let sql_layer = exports.then(|| {
        SqlSpans { tracer }
            .with_filter(Targets::new().with_target("sqlx::query", tracing::Level::DEBUG))
    });

    let installed = tracing_subscriber::registry()
        .with(log_layer.with_filter(log_filter))
        .with(otel_layer)
        .with(sql_layer)
        .try_init();
    if installed.is_ok() {
        EXPORTING.store(exports, Ordering::Relaxed);
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
pub fn extract_context(headers: &HeaderMap) -> Context {
    global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}

/// Writes the current span's trace context into outgoing headers (`traceparent`).
pub fn inject_context(span: &tracing::Span, headers: &mut HeaderMap) {
    let context = span.context();
    global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
    // The W3C propagator writes `tracestate` even when the trace carries none.
    if headers
        .get("tracestate")
        .is_some_and(|value| value.is_empty())
    {
        headers.remove("tracestate");
    }
}

/// The trace id of a span, as 32 hex digits (all zeros when tracing is not installed).
pub fn trace_id(span: &tracing::Span) -> String {
    span.context().span().span_context().trace_id().to_string()
}

/// Turns each finished SQL statement that sqlx reports into a client span under the current span,
/// named by its operation, with `db.system` and the statement summary (placeholders only: the
/// parameter values are never part of it).
struct SqlSpans {
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

impl<S> Layer<S> for SqlSpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
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
        let parent = tracing::Span::current().context();
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
