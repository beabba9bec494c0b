//! The OTLP protobuf body of one batch of spans (`ExportTraceServiceRequest`), written straight
//! from our span records ([`super::span::SpanRecord`]) in one pass. opentelemetry-otlp first
//! converts every span into generated message structs (a `String` per attribute key and value)
//! and prost then walks them computing each nested message's length again at every level: that
//! cost ~28,000 instructions per span, more than the gateway spends on the request itself. Here
//! each span is written once into a scratch buffer and copied behind its length; the resource and
//! the instrumentation scope are encoded once, at start-up.
//!
//! Field numbers are those of opentelemetry-proto's `trace.proto`, `common.proto` and
//! `resource.proto` (v1); the tests decode the bytes with the generated prost types and compare
//! them with opentelemetry-proto's own conversion of the same spans (as the SDK's `SpanData`).

use super::span::{Kind, SpanRecord, Value};

const LEN: u8 = 2;
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const FIXED32: u8 = 5;

/// The encoded `Resource` message of a process and its `InstrumentationScope` (named after the
/// service, as the SDK's tracer was), made once.
#[derive(Debug, Clone, Default)]
pub struct EncodedResource {
    message: Vec<u8>,
    /// `ScopeSpans.scope` (field 1), tag and length included.
    scope: Vec<u8>,
}

impl EncodedResource {
    /// `service.name`, the `telemetry.sdk.*` attributes and `extra` (from
    /// `OTEL_RESOURCE_ATTRIBUTES`; a later key replaces an earlier one, `service.name` is ours).
    pub fn new(service_name: &'static str, extra: Vec<(String, String)>) -> Self {
        let mut attributes: Vec<(String, String)> = Vec::new();
        let ours = [
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.name", "shared-auth"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ];
        let ours = ours
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value.to_owned()));
        for (key, value) in ours.chain(extra) {
            match attributes.iter_mut().find(|(known, _)| *known == key) {
                Some(known) => known.1 = value,
                None => attributes.push((key, value)),
            }
        }
        attributes.retain(|(key, _)| key != "service.name");
        let mut message = Vec::new();
        write_key_value(
            &mut message,
            1,
            "service.name",
            &Value::Static(service_name),
        );
        for (key, value) in attributes {
            write_key_value(&mut message, 1, &key, &Value::Text(value));
        }
        let mut scope = Vec::new();
        write_bytes(&mut scope, 1, &string_field(1, service_name));
        Self { message, scope }
    }
}

fn string_field(field: u32, text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    write_str(&mut out, field, text);
    out
}

/// The `ExportTraceServiceRequest` carrying `spans`: one `ResourceSpans` with one `ScopeSpans`.
pub fn encode_request(resource: &EncodedResource, spans: &[SpanRecord]) -> Vec<u8> {
    let mut scope_spans = Vec::with_capacity(resource.scope.len() + spans.len() * 320);
    scope_spans.extend_from_slice(&resource.scope);
    let mut scratch = Vec::with_capacity(512);
    for span in spans {
        scratch.clear();
        write_span(&mut scratch, span);
        write_bytes(&mut scope_spans, 2, &scratch);
    }
    let resource_spans_len = field_len(resource.message.len()) + field_len(scope_spans.len());
    let mut out = Vec::with_capacity(field_len(resource_spans_len));
    write_tag(&mut out, 1, LEN);
    write_varint(&mut out, resource_spans_len as u64);
    write_bytes(&mut out, 1, &resource.message);
    write_bytes(&mut out, 2, &scope_spans);
    out
}

/// The fields of one `Span` message.
fn write_span(out: &mut Vec<u8>, span: &SpanRecord) {
    let context = &span.context;
    write_id(out, 1, &context.trace_id);
    write_id(out, 2, &context.span_id);
    write_str(out, 3, context.trace_state.as_deref().unwrap_or_default());
    if let Some(parent) = &span.parent_span_id {
        write_id(out, 4, parent);
    }
    write_tag(out, 16, FIXED32);
    out.extend_from_slice(&span_flags(span.parent_is_remote, context.sampled).to_le_bytes());
    write_str(out, 5, &span.name);
    write_uint(out, 6, kind_number(span.kind));
    write_fixed64(out, 7, span.start);
    write_fixed64(out, 8, span.end);
    for (key, value) in &span.attributes {
        write_key_value(out, 9, key, value);
    }
    for event in &span.events {
        let attributes: usize = event
            .attributes
            .iter()
            .map(|(key, value)| field_len(key_value_len(key, value)))
            .sum();
        write_tag(out, 11, LEN);
        write_varint(out, (9 + str_field_len(&event.name) + attributes) as u64);
        write_fixed64(out, 1, event.time);
        write_str(out, 2, &event.name);
        for (key, value) in &event.attributes {
            write_key_value(out, 3, key, value);
        }
    }
    write_uint(out, 12, span.dropped_events.into());
    // Status (field 15) is always present, as opentelemetry-proto sends it.
    let (code, message) = match &span.error {
        None => (0, ""),
        Some(description) => (2, description.as_ref()),
    };
    write_tag(out, 15, LEN);
    write_varint(out, (str_field_len(message) + uint_field_len(code)) as u64);
    write_str(out, 2, message);
    write_uint(out, 3, code);
}

/// OTLP's span flags: the W3C trace flags, and whether the parent is known to be remote.
fn span_flags(parent_is_remote: bool, sampled: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(sampled) | HAS_IS_REMOTE | if parent_is_remote { IS_REMOTE } else { 0 }
}

fn kind_number(kind: Kind) -> u64 {
    match kind {
        Kind::Server => 2,
        Kind::Client => 3,
    }
}

/// A `KeyValue` message as field `field` of its parent.
fn write_key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    write_tag(out, field, LEN);
    write_varint(out, key_value_len(key, value) as u64);
    write_str(out, 1, key);
    write_tag(out, 2, LEN);
    write_varint(out, any_value_len(value) as u64);
    write_any_value(out, value);
}

fn key_value_len(key: &str, value: &Value) -> usize {
    str_field_len(key) + field_len(any_value_len(value))
}

/// The fields of an `AnyValue`: exactly one member of its `value` oneof, written even when it
/// is the default (an empty string is a value, not an absent one).
fn write_any_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Bool(flag) => {
            write_tag(out, 2, VARINT);
            out.push(u8::from(*flag));
        }
        Value::Int(number) => {
            write_tag(out, 3, VARINT);
            write_varint(out, *number as u64);
        }
        Value::Float(number) => {
            write_tag(out, 4, FIXED64);
            out.extend_from_slice(&number.to_le_bytes());
        }
        Value::Static(_) | Value::Text(_) | Value::Shared(_) => {
            let text = value.as_str().unwrap_or_default();
            write_tag(out, 1, LEN);
            write_varint(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
    }
}

fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Bool(_) => 2,
        Value::Int(number) => 1 + varint_len(*number as u64),
        Value::Float(_) => 9,
        Value::Static(_) | Value::Text(_) | Value::Shared(_) => {
            field_len(value.as_str().unwrap_or_default().len())
        }
    }
}

fn write_tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    write_varint(out, u64::from(field << 3 | u32::from(wire_type)));
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The bytes a length-delimited field of `len` bytes takes (tag of a field below 16 included).
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// A string field, left out when empty (proto3's default).
fn write_str(out: &mut Vec<u8>, field: u32, text: &str) {
    if !text.is_empty() {
        write_bytes(out, field, text.as_bytes());
    }
}

fn str_field_len(text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        field_len(text.len())
    }
}

fn write_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    write_tag(out, field, LEN);
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An id field: a known length, so the copy is a few moves rather than a `memcpy` call.
fn write_id<const N: usize>(out: &mut Vec<u8>, field: u32, id: &[u8; N]) {
    write_tag(out, field, LEN);
    out.push(N as u8);
    out.extend_from_slice(id);
}

/// A varint field, left out when zero (proto3's default).
fn write_uint(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        write_tag(out, field, VARINT);
        write_varint(out, value);
    }
}

fn uint_field_len(value: u64) -> usize {
    if value == 0 { 0 } else { 1 + varint_len(value) }
}

fn write_fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    write_tag(out, field, FIXED64);
    out.extend_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SpanData;
    use prost::Message;

    use super::*;
    use crate::telemetry::span::tests_support::record;
    use crate::telemetry::span::{Event, Kind};

    const SERVICE: &str = "gateway";

    fn time(nanos: u64) -> std::time::SystemTime {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    }

    fn otel_value(value: &Value) -> opentelemetry::Value {
        match value {
            Value::Static(text) => (*text).into(),
            Value::Text(text) => text.clone().into(),
            Value::Shared(text) => text.to_string().into(),
            Value::Int(number) => (*number).into(),
            Value::Float(number) => (*number).into(),
            Value::Bool(flag) => (*flag).into(),
        }
    }

    fn key_values(attributes: &[(&'static str, Value)]) -> Vec<KeyValue> {
        attributes
            .iter()
            .map(|(key, value)| KeyValue::new(*key, otel_value(value)))
            .collect()
    }

    /// The same span as the OpenTelemetry SDK's `SpanData`.
    fn span_data(span: &SpanRecord) -> SpanData {
        let context = &span.context;
        let state = context
            .trace_state
            .as_deref()
            .map_or(TraceState::NONE, |state| {
                state.parse().expect("a valid tracestate")
            });
        let mut data = SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(context.trace_id),
                SpanId::from_bytes(context.span_id),
                TraceFlags::SAMPLED,
                false,
                state,
            ),
            parent_span_id: span
                .parent_span_id
                .map_or(SpanId::INVALID, SpanId::from_bytes),
            parent_span_is_remote: span.parent_is_remote,
            span_kind: match span.kind {
                Kind::Server => SpanKind::Server,
                Kind::Client => SpanKind::Client,
            },
            name: span.name.clone(),
            start_time: time(span.start),
            end_time: time(span.end),
            attributes: key_values(&span.attributes),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: span.error.as_ref().map_or(Status::Unset, |description| {
                Status::error(description.clone())
            }),
            instrumentation_scope: InstrumentationScope::builder(SERVICE).build(),
        };
        for event in &span.events {
            data.events.events.push(opentelemetry::trace::Event::new(
                event.name.clone(),
                time(event.time),
                key_values(&event.attributes),
                0,
            ));
        }
        data.events.dropped_count = span.dropped_events;
        data
    }

    /// Our resource attributes besides `service.name`, with `extra` keys in their place.
    fn resource_attributes(extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut attributes = vec![
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.name", "shared-auth"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ];
        for (key, value) in extra {
            attributes.retain(|(known, _)| known != key);
            attributes.push((key, value));
        }
        attributes
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }

    /// What opentelemetry-otlp would have sent for the same spans with a resource of
    /// `service.name` and `attributes`, decoded.
    fn reference(
        attributes: &[(String, String)],
        spans: &[SpanRecord],
    ) -> ExportTraceServiceRequest {
        let resource = Resource::builder_empty()
            .with_attributes(
                attributes
                    .iter()
                    .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
            )
            .with_service_name(SERVICE)
            .build();
        ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans.iter().map(span_data).collect(),
                &ResourceAttributesWithSchema::from(&resource),
            ),
        }
    }

    /// The resource's attributes in key order (the SDK keeps them in a hash map).
    fn sorted(mut request: ExportTraceServiceRequest) -> ExportTraceServiceRequest {
        for resource_spans in &mut request.resource_spans {
            if let Some(resource) = &mut resource_spans.resource {
                resource.attributes.sort_by(|a, b| a.key.cmp(&b.key));
            }
        }
        request
    }

    fn assert_same(extra: &[(&str, &str)], expected: &[(&str, &str)], spans: &[SpanRecord]) {
        let extra = extra
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let bytes = encode_request(&EncodedResource::new(SERVICE, extra), spans);
        let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("valid protobuf");
        let expected = reference(&resource_attributes(expected), spans);
        assert_eq!(sorted(decoded), sorted(expected));
    }

    #[test]
    fn a_plain_server_span_is_what_opentelemetry_proto_sends() {
        assert_same(&[], &[], &[record()]);
    }

    #[test]
    fn every_field_and_value_type_is_what_opentelemetry_proto_sends() {
        let mut full = record();
        full.context.trace_id = (u128::MAX - 7).to_be_bytes();
        full.context.span_id = 0x1234_u64.to_be_bytes();
        full.context.trace_state = Some(Arc::from("vendor=abc,other=x"));
        full.parent_span_id = Some(0xdead_beef_u64.to_be_bytes());
        full.parent_is_remote = true;
        full.kind = Kind::Client;
        full.name = Cow::Owned("a name with ünïcode ✓".to_owned());
        full.attributes = [
            ("empty", Value::Static("")),
            ("bool", Value::Bool(false)),
            ("negative", Value::Int(-42)),
            ("big", Value::Int(i64::MAX)),
            ("float", Value::Float(1.5)),
            ("long", Value::Text("x".repeat(300))),
            ("shared", Value::Shared("http://lingo:8081/".into())),
        ]
        .into_iter()
        .collect();
        full.events = vec![
            Event {
                time: full.start + 10_000,
                name: "upstream timed out".to_owned(),
                attributes: vec![("level", Value::Static("WARN")), ("attempt", Value::Int(2))],
            },
            Event {
                time: full.start,
                name: String::new(),
                attributes: Vec::new(),
            },
        ];
        full.dropped_events = 5;
        full.error = Some(Cow::Borrowed("upstream closed the connection"));

        let mut failed_without_description = record();
        failed_without_description.error = Some(Cow::Borrowed(""));
        failed_without_description.parent_span_id = Some([7; 8]);
        let spans = [full, record(), failed_without_description];
        // OTEL_RESOURCE_ATTRIBUTES may replace our telemetry.sdk.* but not service.name.
        assert_same(
            &[
                ("deployment.environment", "test"),
                ("telemetry.sdk.name", "overridden"),
                ("service.name", "not ours"),
            ],
            &[
                ("deployment.environment", "test"),
                ("telemetry.sdk.name", "overridden"),
            ],
            &spans,
        );
    }

    #[test]
    fn a_batch_of_many_spans_needs_long_lengths() {
        let spans: Vec<SpanRecord> = (0..600).map(|_| record()).collect();
        assert_same(&[], &[], &spans);
    }

    #[test]
    fn varint_lengths_match_their_encoding() {
        for value in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
        }
    }
}
