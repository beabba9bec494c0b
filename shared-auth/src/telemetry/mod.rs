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
//! The spans are our own lean records ([`span`]), not the OpenTelemetry SDK's: a request's
//! server span ([`ServerSpan`]), the gateway's client span per upstream attempt ([`ClientSpan`]),
//! and a client span per SQL statement, which [`TraceEvents`] makes from the event sqlx reports
//! (in this one place, without touching any query). The request's span is the task's request
//! span while the request is served (a task-local, like the request id), so the spans made
//! inside it are its children and warnings and errors logged inside it become its events. Ended
//! spans are queued and sent in batches by one task ([`batch`]), encoded straight into OTLP
//! protobuf ([`otlp_proto`]). A `tracing` span per request stays for the log lines (request id,
//! trace id), as it is without an exporter; going through `tracing-opentelemetry` instead cost
//! ~45,000 instructions per proxied request, and the SDK's spans and batch processor ~22,000
//! (deploy/bench/RESULTS.md, "Tracing cost").

mod batch;
mod otlp_http;
mod otlp_proto;
mod span;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use clap::ValueEnum;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use batch::{BatchConfig, SpanQueue};
pub(crate) use span::method_name;
pub use span::{ClientSpan, ServerSpan, Value, name_request_span};
use span::{Kind, TRACER, Tracer, now_nanos};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Readable lines for a terminal.
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The span exporter of the process; call [`Telemetry::shutdown`] before exiting to flush spans.
pub struct Telemetry {
    exporter: Option<(Arc<SpanQueue>, tokio::task::JoinHandle<()>)>,
}

impl Telemetry {
    /// Sends the spans still queued and stops the exporter task (waiting at most as long as one
    /// export may take).
    pub async fn shutdown(self) {
        let Some((queue, task)) = self.exporter else {
            return;
        };
        queue.close();
        let limit = otlp_http::export_timeout() + Duration::from_secs(1);
        if tokio::time::timeout(limit, task).await.is_err() {
            eprintln!("flushing spans did not finish within {limit:?}");
        }
    }
}

/// Whether OpenTelemetry spans leave this process (an OTLP endpoint is configured).
pub fn exporting() -> bool {
    TRACER.get().is_some()
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

impl Export {
    fn is_on(&self) -> bool {
        match self {
            Export::FromEnvironment => otlp_configured(),
            Export::To { .. } => true,
        }
    }
}

/// The span queue and its exporter task, on the current tokio runtime (the binaries call this
/// from `#[tokio::main]`), off the request path.
fn start_exporter(service_name: &'static str, export: Export) -> (Tracer, Telemetry) {
    let (traces_url, config) = match export {
        Export::FromEnvironment => (None, BatchConfig::from_env()),
        Export::To { traces_url, delay } => (
            Some(traces_url),
            BatchConfig {
                delay,
                ..BatchConfig::from_env()
            },
        ),
    };
    let queue = Arc::new(SpanQueue::new(config));
    let exporter = otlp_http::OtlpHttpExporter::new(traces_url, service_name);
    let task = tokio::spawn(batch::export_loop(queue.clone(), exporter));
    let queued = queue.clone();
    let tracer = Tracer {
        sampler: span::Sampler::from_env(),
        export: Box::new(move |span| queued.push(span)),
    };
    let telemetry = Telemetry {
        exporter: Some((queue, task)),
    };
    (tracer, telemetry)
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
    let exports = export.is_on();
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
        TraceEvents.with_filter(
            Targets::new()
                .with_default(tracing::Level::WARN)
                .with_target("sqlx::query", tracing::Level::DEBUG),
        )
    });

    let installed = tracing_subscriber::registry()
        .with(log_layer.with_filter(log_filter))
        .with(trace_layer)
        .try_init();
    let mut telemetry = Telemetry { exporter: None };
    if installed.is_ok() {
        if exports {
            let (tracer, started) = start_exporter(service_name, export);
            telemetry = started;
            let _ = TRACER.set(tracer);
        }
        LOGS_TRACE_IDS.store(exports && logs_spans, Ordering::Relaxed);
    }
    telemetry
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

/// Turns each finished SQL statement that sqlx reports into a client span under the task's
/// request span, named by its operation, with `db.system` and the statement summary
/// (placeholders only: the parameter values are never part of it); and each warning or error
/// logged while a request is served into an event of its span (an error also marks the span as
/// failed).
struct TraceEvents;

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
    attributes: Vec<(&'static str, Value)>,
}

impl Visit for SpanEvent {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.attributes
            .push((field.name(), Value::Text(value.to_owned())));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push((field.name(), Value::Int(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.attributes
            .push((field.name(), Value::Int(value as i64)));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.push((field.name(), Value::Float(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push((field.name(), Value::Bool(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.attributes.push((field.name(), Value::Text(text)));
        }
    }
}

/// The span name and `db.operation` of a statement, without an allocation for the usual ones.
fn sql_operation(summary: &str) -> (Cow<'static, str>, Value) {
    let first = summary.split_whitespace().next().unwrap_or("SQL");
    for (operation, name) in [
        ("SELECT", "SELECT postgresql"),
        ("INSERT", "INSERT postgresql"),
        ("UPDATE", "UPDATE postgresql"),
        ("DELETE", "DELETE postgresql"),
        ("WITH", "WITH postgresql"),
    ] {
        if first.eq_ignore_ascii_case(operation) {
            return (Cow::Borrowed(name), Value::Static(operation));
        }
    }
    let operation = first.to_ascii_uppercase();
    (
        Cow::Owned(format!("{operation} postgresql")),
        Value::Text(operation),
    )
}

impl TraceEvents {
    fn sql_span(event: &Event<'_>) {
        let mut sql = SqlEvent::default();
        event.record(&mut sql);
        let Some(mut summary) = sql.summary else {
            return;
        };
        let (name, operation) = sql_operation(&summary);
        // sqlx marks a shortened summary with " …".
        summary.truncate(summary.trim_end_matches(" …").len());
        let end = SystemTime::now();
        let start = end - Duration::from_secs_f64(sql.elapsed_secs.unwrap_or_default().max(0.0));
        let attributes = [
            ("db.system", Value::Static("postgresql")),
            ("db.operation", operation),
            ("db.query.summary", Value::Text(summary)),
            (
                "db.rows_returned",
                Value::Int(sql.rows_returned.unwrap_or_default() as i64),
            ),
        ];
        if let Some(mut span) = span::child_span(Kind::Client, name, attributes.into()) {
            span.start = span::nanos(start);
            span.end = span::nanos(end);
            span.finish();
        }
    }

    fn span_event(event: &Event<'_>) {
        let metadata = event.metadata();
        span::with_request_span(|span| {
            let mut fields = SpanEvent::default();
            event.record(&mut fields);
            fields
                .attributes
                .push(("level", Value::Static(metadata.level().as_str())));
            fields
                .attributes
                .push(("target", Value::Static(metadata.target())));
            let event = span::Event {
                time: now_nanos(),
                name: fields.message,
                attributes: fields.attributes,
            };
            span.add_event(event, *metadata.level() == tracing::Level::ERROR);
        });
    }
}

impl<S> Layer<S> for TraceEvents
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
        if event.metadata().target() == "sqlx::query" {
            Self::sql_span(event);
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

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::span::tests_support::record;
    use super::*;

    #[tokio::test]
    async fn warnings_and_errors_inside_a_request_become_events_of_its_span() {
        let subscriber = tracing_subscriber::registry()
            .with(TraceEvents.with_filter(Targets::new().with_default(tracing::Level::WARN)));
        let _guard = tracing::subscriber::set_default(subscriber);
        tracing::warn!("outside any request: no span to add it to");
        let request = ServerSpan::of_record(record());
        let ((), request) = request
            .run(async {
                tracing::info!("info lines are not events");
                tracing::warn!(attempt = 2_u64, upstream = "lingo-1", "upstream slow");
                tracing::error!(ok = false, ratio = 0.5, "it broke");
            })
            .await;
        let span = request.expect("the span comes back").record().clone();
        let names: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["upstream slow", "it broke"]);
        assert_eq!(
            span.events[0].attributes,
            [
                ("attempt", Value::Int(2)),
                ("upstream", Value::Text("lingo-1".to_owned())),
                ("level", Value::Static("WARN")),
                ("target", Value::Static(module_path!())),
            ]
        );
        assert_eq!(
            span.events[1].attributes[..2],
            [("ok", Value::Bool(false)), ("ratio", Value::Float(0.5)),]
        );
        assert_eq!(
            span.error.as_deref(),
            Some(""),
            "an error marks the span failed"
        );
    }

    #[test]
    fn sql_spans_are_named_by_their_operation() {
        assert_eq!(
            sql_operation("select * from t where id = $1"),
            (Cow::Borrowed("SELECT postgresql"), Value::Static("SELECT"))
        );
        assert_eq!(
            sql_operation("CALL refresh()"),
            (
                Cow::Owned("CALL postgresql".to_owned()),
                Value::Text("CALL".to_owned())
            )
        );
    }
}
