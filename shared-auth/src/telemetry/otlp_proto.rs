//! The OTLP protobuf body of one batch of spans (`ExportTraceServiceRequest`), written straight
//! from the SDK's `SpanData` in one pass. opentelemetry-otlp first converts every span into
//! generated message structs (a `String` per attribute key and value) and prost then walks them
//! computing each nested message's length again at every level: that cost ~28,000 instructions per
//! span, more than the gateway spends on the request itself. Here each span is written once into
//! a scratch buffer and copied behind its length; the resource is encoded once, when it is set.
//!
//! Field numbers are those of opentelemetry-proto's `trace.proto`, `common.proto` and
//! `resource.proto` (v1); the tests decode the bytes with the generated prost types and compare
//! them with opentelemetry-proto's own conversion of the same spans.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;

const LEN: u8 = 2;
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const FIXED32: u8 = 5;

/// The encoded `Resource` message of a process and its schema URL, made once.
#[derive(Debug, Clone, Default)]
pub struct EncodedResource {
    message: Vec<u8>,
    schema_url: String,
}

impl EncodedResource {
    pub fn new(resource: &Resource) -> Self {
        let mut message = Vec::new();
        for (key, value) in resource.iter() {
            write_key_value(&mut message, 1, key.as_str(), value);
        }
        Self {
            message,
            schema_url: resource.schema_url().unwrap_or_default().to_owned(),
        }
    }
}

/// The `ExportTraceServiceRequest` carrying `spans`: one `ResourceSpans`, one `ScopeSpans` per
/// instrumentation scope (in order of first appearance).
pub fn encode_request(resource: &EncodedResource, spans: &[SpanData]) -> Vec<u8> {
    let mut scopes: Vec<(&InstrumentationScope, Vec<u8>)> = Vec::new();
    let mut scratch = Vec::with_capacity(1024);
    for span in spans {
        let index = match scopes
            .iter()
            .position(|(scope, _)| *scope == &span.instrumentation_scope)
        {
            Some(index) => index,
            None => {
                let mut body = Vec::with_capacity(spans.len() * 512);
                write_scope(&mut body, &span.instrumentation_scope);
                scopes.push((&span.instrumentation_scope, body));
                scopes.len() - 1
            }
        };
        scratch.clear();
        write_span(&mut scratch, span);
        write_bytes(&mut scopes[index].1, 2, &scratch);
    }
    for (scope, body) in &mut scopes {
        write_str(body, 3, scope.schema_url().unwrap_or_default());
    }

    let resource_field = field_len(resource.message.len());
    let scopes_len: usize = scopes.iter().map(|(_, body)| field_len(body.len())).sum();
    let schema_len = str_field_len(&resource.schema_url);
    let resource_spans_len = resource_field + scopes_len + schema_len;
    let mut out = Vec::with_capacity(field_len(resource_spans_len));
    write_tag(&mut out, 1, LEN);
    write_varint(&mut out, resource_spans_len as u64);
    write_bytes(&mut out, 1, &resource.message);
    for (_, body) in &scopes {
        write_bytes(&mut out, 2, body);
    }
    write_str(&mut out, 3, &resource.schema_url);
    out
}

/// `ScopeSpans.scope` (field 1): an `InstrumentationScope`.
fn write_scope(out: &mut Vec<u8>, scope: &InstrumentationScope) {
    let name = scope.name();
    let version = scope.version().unwrap_or_default();
    let attributes: usize = scope.attributes().map(key_value_field_len).sum();
    let len = str_field_len(name) + str_field_len(version) + attributes;
    write_tag(out, 1, LEN);
    write_varint(out, len as u64);
    write_str(out, 1, name);
    write_str(out, 2, version);
    for attribute in scope.attributes() {
        write_key_value(out, 3, attribute.key.as_str(), &attribute.value);
    }
}

/// The fields of one `Span` message.
fn write_span(out: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    write_bytes(out, 1, &context.trace_id().to_bytes());
    write_bytes(out, 2, &context.span_id().to_bytes());
    write_trace_state(out, 3, context.trace_state());
    if span.parent_span_id != SpanId::INVALID {
        write_bytes(out, 4, &span.parent_span_id.to_bytes());
    }
    write_tag(out, 16, FIXED32);
    out.extend_from_slice(
        &span_flags(span.parent_span_is_remote, context.trace_flags().to_u8()).to_le_bytes(),
    );
    write_str(out, 5, &span.name);
    write_uint(out, 6, kind_number(&span.span_kind));
    write_fixed64(out, 7, nanos(span.start_time));
    write_fixed64(out, 8, nanos(span.end_time));
    for attribute in &span.attributes {
        write_key_value(out, 9, attribute.key.as_str(), &attribute.value);
    }
    write_uint(out, 10, span.dropped_attributes_count.into());
    for event in span.events.iter() {
        let attributes: usize = event.attributes.iter().map(key_value_field_len).sum();
        let len = 9
            + str_field_len(&event.name)
            + attributes
            + uint_field_len(event.dropped_attributes_count.into());
        write_tag(out, 11, LEN);
        write_varint(out, len as u64);
        write_fixed64(out, 1, nanos(event.timestamp));
        write_str(out, 2, &event.name);
        for attribute in &event.attributes {
            write_key_value(out, 3, attribute.key.as_str(), &attribute.value);
        }
        write_uint(out, 4, event.dropped_attributes_count.into());
    }
    write_uint(out, 12, span.events.dropped_count.into());
    for link in span.links.iter() {
        let linked = &link.span_context;
        let state = linked.trace_state().header();
        let attributes: usize = link.attributes.iter().map(key_value_field_len).sum();
        let len = 18
            + 10
            + str_field_len(&state)
            + attributes
            + uint_field_len(link.dropped_attributes_count.into())
            + 5;
        write_tag(out, 13, LEN);
        write_varint(out, len as u64);
        write_bytes(out, 1, &linked.trace_id().to_bytes());
        write_bytes(out, 2, &linked.span_id().to_bytes());
        write_str(out, 3, &state);
        for attribute in &link.attributes {
            write_key_value(out, 4, attribute.key.as_str(), &attribute.value);
        }
        write_uint(out, 5, link.dropped_attributes_count.into());
        write_tag(out, 6, FIXED32);
        out.extend_from_slice(
            &span_flags(linked.is_remote(), linked.trace_flags().to_u8()).to_le_bytes(),
        );
    }
    write_uint(out, 14, span.links.dropped_count.into());
    // Status (field 15) is always present, as opentelemetry-proto sends it.
    let (code, message) = match &span.status {
        Status::Unset => (0, ""),
        Status::Ok => (1, ""),
        Status::Error { description } => (2, description.as_ref()),
    };
    write_tag(out, 15, LEN);
    write_varint(out, (str_field_len(message) + uint_field_len(code)) as u64);
    write_str(out, 2, message);
    write_uint(out, 3, code);
}

/// OTLP's span flags: the W3C trace flags, and whether the parent is known to be remote.
fn span_flags(parent_is_remote: bool, trace_flags: u8) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(trace_flags) | HAS_IS_REMOTE | if parent_is_remote { IS_REMOTE } else { 0 }
}

fn kind_number(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

fn write_trace_state(out: &mut Vec<u8>, field: u32, state: &TraceState) {
    if *state != TraceState::NONE {
        write_str(out, field, &state.header());
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

fn key_value_field_len(attribute: &KeyValue) -> usize {
    field_len(key_value_len(attribute.key.as_str(), &attribute.value))
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
        Value::I64(number) => {
            write_tag(out, 3, VARINT);
            write_varint(out, *number as u64);
        }
        Value::F64(number) => {
            write_tag(out, 4, FIXED64);
            out.extend_from_slice(&number.to_le_bytes());
        }
        Value::String(text) => {
            write_tag(out, 1, LEN);
            write_varint(out, text.as_str().len() as u64);
            out.extend_from_slice(text.as_str().as_bytes());
        }
        Value::Array(array) => {
            write_tag(out, 5, LEN);
            write_varint(out, array_len(array) as u64);
            for_each_in_array(array, |item| {
                write_tag(out, 1, LEN);
                write_varint(out, any_value_len(&item) as u64);
                write_any_value(out, &item);
            });
        }
        // A value type added to the API after this was written: sent as its text.
        other => {
            let text = other.as_str();
            write_tag(out, 1, LEN);
            write_varint(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
    }
}

fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Bool(_) => 2,
        Value::I64(number) => 1 + varint_len(*number as u64),
        Value::F64(_) => 9,
        Value::String(text) => field_len(text.as_str().len()),
        Value::Array(array) => field_len(array_len(array)),
        other => field_len(other.as_str().len()),
    }
}

/// The length of an `ArrayValue` message: one `AnyValue` field per item.
fn array_len(array: &Array) -> usize {
    let mut len = 0;
    for_each_in_array(array, |item| len += field_len(any_value_len(&item)));
    len
}

fn for_each_in_array(array: &Array, mut each: impl FnMut(Value)) {
    match array {
        Array::Bool(items) => items.iter().for_each(|item| each(Value::Bool(*item))),
        Array::I64(items) => items.iter().for_each(|item| each(Value::I64(*item))),
        Array::F64(items) => items.iter().for_each(|item| each(Value::F64(*item))),
        Array::String(items) => items
            .iter()
            .for_each(|item| each(Value::String(item.clone()))),
        _ => {}
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
    use std::time::Duration;

    use opentelemetry::trace::{SpanContext, TraceFlags, TraceId};
    use opentelemetry::{Key, StringValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;

    use super::*;

    fn context(trace: u128, span: u64, remote: bool, state: &str) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            state.parse().unwrap(),
        )
    }

    fn span(name: &'static str, scope: &InstrumentationScope) -> SpanData {
        let start = UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
        SpanData {
            span_context: context(
                0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
                0x00f0_67aa_0ba9_02b7,
                false,
                "",
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Server,
            name: Cow::Borrowed(name),
            start_time: start,
            end_time: start + Duration::from_micros(1234),
            attributes: vec![KeyValue::new("http.request.method", "GET")],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope.clone(),
        }
    }

    /// What opentelemetry-otlp would have sent for the same spans, decoded.
    fn reference(resource: &Resource, spans: Vec<SpanData>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(resource),
            ),
        }
    }

    fn assert_same(resource: &Resource, spans: Vec<SpanData>) {
        let bytes = encode_request(&EncodedResource::new(resource), &spans);
        let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("valid protobuf");
        assert_eq!(decoded, reference(resource, spans));
    }

    fn resource() -> Resource {
        Resource::builder_empty()
            .with_service_name("gateway")
            .with_attribute(KeyValue::new("deployment.environment", "test"))
            .build()
    }

    #[test]
    fn a_plain_server_span_is_what_opentelemetry_proto_sends() {
        let scope = InstrumentationScope::builder("gateway").build();
        assert_same(&resource(), vec![span("GET /v1/lingo/languages", &scope)]);
    }

    #[test]
    fn every_field_and_value_type_is_what_opentelemetry_proto_sends() {
        let scope = InstrumentationScope::builder("lingo-service")
            .with_version("1.2.3")
            .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
            .with_attributes([KeyValue::new("scope.flag", true)])
            .build();
        let mut full = span("SELECT postgresql", &scope);
        full.span_context = context(u128::MAX - 7, 0x1234, false, "vendor=abc,other=x");
        full.parent_span_id = SpanId::from(0xdead_beef_u64);
        full.parent_span_is_remote = true;
        full.span_kind = SpanKind::Client;
        full.name = Cow::Owned("a name with ünïcode ✓".to_owned());
        full.attributes = vec![
            KeyValue::new("empty", ""),
            KeyValue::new("bool", false),
            KeyValue::new("negative", -42_i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("float", 1.5_f64),
            KeyValue::new(Key::from("long"), "x".repeat(300)),
            KeyValue::new(
                "strings",
                Value::Array(Array::String(vec![
                    StringValue::from("a"),
                    StringValue::from(""),
                ])),
            ),
            KeyValue::new("ints", Value::Array(Array::I64(vec![0, -1, 300]))),
            KeyValue::new("floats", Value::Array(Array::F64(vec![0.0, -2.25]))),
            KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
        ];
        full.dropped_attributes_count = 3;
        full.events.events.push(opentelemetry::trace::Event::new(
            "upstream timed out",
            full.start_time + Duration::from_micros(10),
            vec![
                KeyValue::new("level", "WARN"),
                KeyValue::new("attempt", 2_i64),
            ],
            1,
        ));
        full.events.events.push(opentelemetry::trace::Event::new(
            "",
            full.start_time,
            vec![],
            0,
        ));
        full.events.dropped_count = 5;
        full.links.links.push(opentelemetry::trace::Link::new(
            context(7, 8, true, "k=v"),
            vec![KeyValue::new("link.kind", "follows")],
            2,
        ));
        full.links.dropped_count = 1;
        full.status = Status::error("upstream closed the connection");

        let mut ok = span("ok", &scope);
        ok.status = Status::Ok;
        ok.span_context = SpanContext::new(
            TraceId::from(1_u128),
            SpanId::from(2_u64),
            TraceFlags::NOT_SAMPLED,
            false,
            TraceState::NONE,
        );
        let other_scope = InstrumentationScope::builder("tracing-opentelemetry").build();
        let spans = vec![
            full,
            span("second", &other_scope),
            ok,
            span("third", &scope),
        ];
        assert_same(&resource(), spans);
    }

    #[test]
    fn a_batch_of_many_spans_needs_long_lengths() {
        let scope = InstrumentationScope::builder("gateway").build();
        let spans: Vec<SpanData> = (0..600).map(|_| span("GET", &scope)).collect();
        assert_same(&resource(), spans);
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
