//! Request-body and query-string extractors whose every rejection is a contract problem:
//! 415 `unsupported_media_type`, 413 `payload_too_large`, 400 `malformed_json`,
//! 422 `validation_failed` (with the bad field), 400 `invalid_query`.

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use crate::http::codes::SharedCode;
use crate::http::problem::{FieldError, Problem};
use crate::http::stack::MAX_BODY_BYTES;

/// Like `axum::Json`, but strict about the content type and answering in problems.
/// Request types should use `#[serde(deny_unknown_fields)]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

/// The rules of a request type's values (ranges, lengths, fields that must agree). For a body
/// whose shape is wrong, [`Json`] names the fields that break them in the same 422 as the
/// shape's errors (contract: "one entry per bad field"); on a body of the right shape the
/// handler checks them itself, as before.
pub trait FieldRules {
    /// Every field whose value breaks a rule. `stand_in(field)` is true for a field whose value
    /// is not the client's (the shape check put a value of the right kind there to read on): a
    /// rule that reads one is left out, so that no field is named for a value nobody sent.
    fn broken_rules(&self, stand_in: &dyn Fn(&str) -> bool) -> Vec<FieldError>;
}

/// Whether `headers` declare a JSON body (`application/json` or `application/*+json`) in UTF-8:
/// a `charset` parameter other than `utf-8` (or its subset `us-ascii`) is not read as JSON (RFC 8259 8.1: JSON is UTF-8; a
/// body labelled Latin-1 would otherwise be read as UTF-8 and its accents misread or refused).
/// `Content-Type` is a single media type (RFC 9110 8.3): a body labelled twice has none, whatever
/// the two say, rather than the type of whichever line a reader takes.
fn is_json(headers: &HeaderMap) -> bool {
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (types.next().and_then(|v| v.to_str().ok()), types.next()) else {
        return false;
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let is_json_type = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    is_json_type
        && parts.all(|parameter| match parameter.split_once('=') {
            Some((name, charset)) if name.trim().eq_ignore_ascii_case("charset") => {
                let charset = charset.trim().trim_matches('"');
                // US-ASCII is a subset of UTF-8: such a body reads the same either way.
                ["utf-8", "us-ascii"]
                    .iter()
                    .any(|utf8| charset.eq_ignore_ascii_case(utf8))
            }
            _ => true,
        })
}

/// A body in a content coding (`Content-Encoding: gzip` and the like) is 415: the services read
/// bodies as sent (RFC 9110 15.5.16), and one labelled gzip is neither unpacked nor taken as is.
fn refuse_content_coding(headers: &HeaderMap) -> Result<(), Problem> {
    let coded = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|value| value.to_str().unwrap_or("?").split(','))
        .any(|coding| !coding.trim().eq_ignore_ascii_case("identity"));
    if coded {
        return Err(
            Problem::from_code(SharedCode::UnsupportedMediaType).with_detail(
                "request bodies are not accepted in a content coding (Content-Encoding)",
            ),
        );
    }
    Ok(())
}

/// The body, read to its end within the services' limit (the router's `DefaultBodyLimit`).
async fn read_within_limit<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, Problem> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Problem::from_code(SharedCode::PayloadTooLarge)
            } else {
                Problem::from_code(SharedCode::BadRequest).with_detail(rejection.body_text())
            }
        })
}

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned + FieldRules,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let typed = request.headers().contains_key(header::CONTENT_TYPE);
        let declared = request.body().size_hint().exact();
        // An untyped body of known length is refused unread; one of unknown length (chunked) is
        // read first, since it may turn out empty (a missing body, 400 below).
        let untyped_body = !typed && declared.is_some_and(|len| len > 0);
        if untyped_body || (typed && !is_json(request.headers())) {
            return Err(Problem::from_code(SharedCode::UnsupportedMediaType));
        }
        refuse_content_coding(request.headers())?;
        if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
            return Err(Problem::from_code(SharedCode::PayloadTooLarge));
        }
        let bytes = read_within_limit(request, state).await?;
        if !typed {
            // Nothing sent at all is a missing body, which is what the client must fix; a body
            // without a type is 415.
            let nothing_sent = bytes.iter().all(u8::is_ascii_whitespace);
            return Err(if nothing_sent {
                empty_body()
            } else {
                Problem::from_code(SharedCode::UnsupportedMediaType)
            });
        }
        parse_json(&bytes).map(Json)
    }
}

/// For a route that takes no body (the last extractor of its handler): one sent anyway must
/// still be JSON without a content coding (415) and within the services' limit (413), whether its
/// length is declared or it comes in chunks. It is read to its end and thrown away.
#[derive(Debug, Clone, Copy)]
pub struct NoBody;

impl<S: Send + Sync> FromRequest<S> for NoBody {
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let headers = request.headers();
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        let has_body =
            declared.is_some_and(|len| len > 0) || headers.contains_key(header::TRANSFER_ENCODING);
        if !has_body {
            return Ok(NoBody);
        }
        if !is_json(headers) {
            return Err(Problem::from_code(SharedCode::UnsupportedMediaType));
        }
        refuse_content_coding(headers)?;
        if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
            return Err(Problem::from_code(SharedCode::PayloadTooLarge));
        }
        read_within_limit(request, state).await?;
        Ok(NoBody)
    }
}

/// Parses a JSON object into `T`: syntax errors are 400, shape errors 422 naming the field. A
/// member given twice is 422 too: read through a JSON value, the last one would silently win.
///
/// A body that is an object and fits `T` is parsed once, straight into `T`; any other is read
/// again by [`parse_checked`], which names the problem. Both accept the same bodies when `T`
/// reads every member it is given (`deny_unknown_fields`, as request types must): the one
/// difference is a member `T` skips unread, where the direct parse does not check a number's
/// range nor a string's escapes (`1e999`, a lone `\ud800`) and the checked one does.
pub fn parse_json<T: DeserializeOwned + FieldRules>(bytes: &[u8]) -> Result<T, Problem> {
    let is_object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if is_object && let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    parse_checked(bytes)
}

/// [`parse_json`]'s reading of a body that did not parse straight into `T`: as a JSON value
/// first (400 for bad syntax, 422 for a number out of range or a body that is not an object),
/// then into `T`: 422 naming every field that does not fit by its path (the first as serde
/// reports it, every unknown member of the top level, then [`later_bad_fields`]).
fn parse_checked<T: DeserializeOwned + FieldRules>(bytes: &[u8]) -> Result<T, Problem> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(empty_body());
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        // `1e999` is valid JSON syntax, only no number a field can take: a shape error.
        if e.to_string().starts_with("number out of range") {
            return Problem::validation(vec![FieldError::new(
                "body",
                format!("holds a number out of range ({e})"),
            )]);
        }
        Problem::from_code(SharedCode::MalformedJson)
            .with_detail(format!("the request body is not valid JSON: {e}"))
    })?;
    if !value.is_object() {
        return Err(Problem::validation(vec![FieldError::new(
            "body",
            "must be a JSON object",
        )]));
    }
    let mut body = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut body).map_err(|error| {
        let path = error.path().to_string();
        let message = error.into_inner().to_string();
        // serde_path_to_error's path of a top-level unknown member is its own name.
        let top_level = path == "." || !path.contains(['.', '[']);
        let mut fields = match unknown_fields::<T>(&value) {
            unknown if top_level && message.starts_with("unknown field") && !unknown.is_empty() => {
                unknown
            }
            _ => vec![field_error(&path, &message)],
        };
        let reading = later_bad_fields::<T>(value);
        for field in reading.fields {
            push_once(&mut fields, field);
        }
        if let Some(fitted) = reading.fitted {
            let stand_in = |field: &str| reading.stand_ins.iter().any(|path| path == field);
            for field in fitted.broken_rules(&stand_in) {
                push_once(&mut fields, field);
            }
        }
        Problem::validation(fields)
    })
}

/// How many more readings [`later_bad_fields`] may make of one body (each is a whole
/// deserialization of it, on bodies that are refused anyway).
const MAX_READINGS: usize = 24;

/// What [`later_bad_fields`] found: the bad fields, and the body as `T` once it fits (with the
/// paths of the fields given stand-ins), if it came to fit.
struct Reading<T> {
    fields: Vec<FieldError>,
    fitted: Option<T>,
    stand_ins: Vec<String>,
}

/// The bad fields of `value` past the first (contract: "one entry per bad field"). serde stops
/// at the first field that does not fit `T`, so after naming one this puts in its place a value
/// of a kind it accepts (or takes an unknown member out) and reads again, until `T` fits, no
/// stand-in fits, or [`MAX_READINGS`] are spent.
fn later_bad_fields<T: DeserializeOwned>(mut value: serde_json::Value) -> Reading<T> {
    let mut reading = Reading {
        fields: Vec::new(),
        fitted: None,
        stand_ins: Vec::new(),
    };
    let mut readings = 0;
    while readings < MAX_READINGS {
        readings += 1;
        let error = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(fitted) => {
                reading.fitted = Some(fitted);
                break;
            }
            Err(error) => error,
        };
        let (path, message) = (error.path().clone(), error.into_inner().to_string());
        push_once(
            &mut reading.fields,
            field_error(&path.to_string(), &message),
        );
        let Some(slot) = BadSlot::of(&path, &message) else {
            break;
        };
        if slot.unknown {
            slot.remove(&mut value);
            continue;
        }
        let stand_in = stand_ins(&message).into_iter().find(|stand_in| {
            readings += 1;
            let mut trial = value.clone();
            slot.put(&mut trial, stand_in.clone());
            match serde_path_to_error::deserialize::<_, T>(&trial) {
                Ok(_) => true,
                Err(next) => next.path().to_string() != slot.field_path(),
            }
        });
        match stand_in {
            Some(stand_in) => {
                slot.put(&mut value, stand_in);
                reading.stand_ins.push(slot.field_path());
            }
            None => break,
        }
    }
    reading
}

/// Values to try in place of a bad or missing field: the first variant serde expected in place of
/// an unknown one,
/// then one of each JSON kind.
fn stand_ins(message: &str) -> Vec<serde_json::Value> {
    let mut values = Vec::new();
    // "unknown variant `meh`, expected `again` or `good`" (or "expected one of `again`, ...").
    if message.starts_with("unknown variant")
        && let Some((_, expected)) = message.split_once(", expected ")
        && let Some(variant) = expected.split('`').nth(1)
    {
        values.push(serde_json::Value::String(variant.to_owned()));
    }
    values.extend([
        serde_json::json!(0),
        serde_json::json!(""),
        serde_json::json!(false),
        serde_json::json!([]),
        serde_json::json!({}),
    ]);
    values
}

/// Where in the body a field error points: the object holding the member, and the member's name
/// (a missing field is named in serde's message, at the path of its object).
struct BadSlot {
    object: Vec<serde_path_to_error::Segment>,
    member: MemberKey,
    unknown: bool,
}

enum MemberKey {
    Name(String),
    Index(usize),
}

impl BadSlot {
    fn of(path: &serde_path_to_error::Path, message: &str) -> Option<Self> {
        use serde_path_to_error::Segment;
        let mut segments: Vec<Segment> = path.iter().cloned().collect();
        if message.starts_with("missing field") {
            let name = message.split('`').nth(1)?.to_owned();
            return Some(Self {
                object: segments,
                member: MemberKey::Name(name),
                unknown: false,
            });
        }
        let member = match segments.pop()? {
            Segment::Map { key } => MemberKey::Name(key),
            Segment::Seq { index } => MemberKey::Index(index),
            _ => return None,
        };
        Some(Self {
            object: segments,
            member,
            unknown: message.starts_with("unknown field"),
        })
    }

    /// The path the field's own errors have, as serde_path_to_error writes it.
    fn field_path(&self) -> String {
        let mut segments = self.object.clone();
        segments.push(match &self.member {
            MemberKey::Name(key) => serde_path_to_error::Segment::Map { key: key.clone() },
            MemberKey::Index(index) => serde_path_to_error::Segment::Seq { index: *index },
        });
        segments
            .iter()
            .fold(String::new(), |path, segment| match segment {
                serde_path_to_error::Segment::Seq { .. } => format!("{path}{segment}"),
                _ if path.is_empty() => segment.to_string(),
                _ => format!("{path}.{segment}"),
            })
    }

    fn container<'v>(&self, value: &'v mut serde_json::Value) -> Option<&'v mut serde_json::Value> {
        use serde_path_to_error::Segment;
        self.object
            .iter()
            .try_fold(value, |value, segment| match segment {
                Segment::Map { key } => value.get_mut(key.as_str()),
                Segment::Seq { index } => value.get_mut(*index),
                _ => None,
            })
    }

    fn put(&self, value: &mut serde_json::Value, stand_in: serde_json::Value) {
        match (self.container(value), &self.member) {
            (Some(serde_json::Value::Object(object)), MemberKey::Name(name)) => {
                object.insert(name.clone(), stand_in);
            }
            (Some(serde_json::Value::Array(items)), MemberKey::Index(index)) => {
                if let Some(item) = items.get_mut(*index) {
                    *item = stand_in;
                }
            }
            _ => {}
        }
    }

    fn remove(&self, value: &mut serde_json::Value) {
        if let (Some(serde_json::Value::Object(object)), MemberKey::Name(name)) =
            (self.container(value), &self.member)
        {
            object.remove(name);
        }
    }
}

/// Adds `field` unless its field is named already: each is named once, by the first thing
/// found wrong with it.
fn push_once(fields: &mut Vec<FieldError>, field: FieldError) {
    if !fields.iter().any(|named| named.field == field.field) {
        fields.push(field);
    }
}

/// Every member of `object` that `T` does not accept, not only the first one serde stopped at; in
/// name order. Empty when `T` does not declare its fields (a map, a flattened struct).
fn unknown_fields<T: DeserializeOwned>(object: &serde_json::Value) -> Vec<FieldError> {
    let accepted = declared_fields::<T>();
    if accepted.is_empty() {
        return Vec::new();
    }
    object
        .as_object()
        .into_iter()
        .flat_map(|members| members.keys())
        .filter(|name| !accepted.contains(&name.as_str()))
        .map(|name| FieldError::new(name, "is not an accepted field"))
        .collect()
}

/// The field names a derived `Deserialize` of a struct declares: asked of a deserializer that
/// only records them.
fn declared_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(serde::de::Error::custom("only the field names were wanted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn empty_body() -> Problem {
    Problem::from_code(SharedCode::MalformedJson).with_detail("the request body is empty")
}

/// Turns serde's message into a field error. A missing or repeated field is named only in the
/// message, at the path of the object that lacks or repeats it (`answers[2]`, or `.` for the
/// body); an unknown one at its own path (`answers[2].extra`). Either way the error names the
/// field's whole path, as a client needs to find it in a list.
fn field_error(path: &str, message: &str) -> FieldError {
    let quoted = message.split('`').nth(1).unwrap_or_default();
    let member_of_path = || match path {
        "." => quoted.to_owned(),
        object => format!("{object}.{quoted}"),
    };
    if message.starts_with("missing field") {
        return FieldError::new(member_of_path(), "is required");
    }
    if message.starts_with("unknown field") {
        let field = if path == "." { quoted } else { path };
        return FieldError::new(field, "is not an accepted field");
    }
    if message.starts_with("duplicate field") {
        return FieldError::new(member_of_path(), "is given more than once");
    }
    let field = if path == "." { "body" } else { path };
    let message = if message.starts_with("invalid type: null") {
        "must not be null".to_owned()
    } else {
        in_json_words(message)
    };
    FieldError::new(field, message)
}

/// serde's message in the words of JSON rather than Rust: no parser position, no Rust type
/// names ("invalid type: string \"5\", expected an integer", not "... expected i64 at line 1
/// column 24").
fn in_json_words(message: &str) -> String {
    let message = strip_position(message);
    let rust_types = [
        ("i8", "an integer"),
        ("i16", "an integer"),
        ("i32", "an integer"),
        ("i64", "an integer"),
        ("u8", "a non-negative integer"),
        ("u16", "a non-negative integer"),
        ("u32", "a non-negative integer"),
        ("u64", "a non-negative integer"),
        ("f32", "a number"),
        ("f64", "a number"),
    ];
    let (found, expected) = message.rsplit_once(", expected ").unwrap_or((message, ""));
    let found = found.replace("floating point", "number");
    match rust_types.iter().find(|(rust, _)| *rust == expected) {
        Some((_, json)) => format!("{found}, expected {json}"),
        None if expected.is_empty() => found,
        None => format!("{found}, expected {expected}"),
    }
}

/// `message` without serde_json's " at line L column C".
fn strip_position(message: &str) -> &str {
    let Some((text, position)) = message.rsplit_once(" at line ") else {
        return message;
    };
    let is_position = position
        .split_once(" column ")
        .is_some_and(|(line, column)| {
            [line, column]
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
    if is_position { text } else { message }
}

/// Like `axum::extract::Query`, answering 400 `invalid_query` when the string does not fit `T`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Problem> {
        let query = parts.uri.query().unwrap_or_default();
        // `form_urlencoded` would keep a `%` without two hex digits as it is (`q=100%` as
        // "100%"), guessing at a string RFC 3986 does not allow.
        if has_broken_escape(query) {
            return Err(Problem::invalid_query(
                "the query string has a % that is not followed by two hex digits (write % as %25)",
            ));
        }
        // `form_urlencoded` would read bytes that are no UTF-8 as U+FFFD: `q=%FF` would search
        // for a replacement character instead of being refused as the malformed string it is.
        if percent_encoding::percent_decode_str(query)
            .decode_utf8()
            .is_err()
        {
            return Err(Problem::invalid_query(
                "the query string is not UTF-8 once its %-escapes are decoded",
            ));
        }
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(Query)
            .map_err(|error| {
                let path = error.path().to_string();
                let message = error.into_inner().to_string();
                let detail = if path == "." {
                    message
                } else {
                    format!("{path}: {message}")
                };
                Problem::invalid_query(detail)
            })
    }
}

/// Whether `query` has a `%` that does not start a `%XX` escape (two hex digits).
fn has_broken_escape(query: &str) -> bool {
    let bytes = query.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Input {
        count: u32,
        name: String,
    }

    impl FieldRules for Input {
        fn broken_rules(&self, _: &dyn Fn(&str) -> bool) -> Vec<FieldError> {
            Vec::new()
        }
    }

    fn field_of(result: Result<Input, Problem>) -> (u16, String, String) {
        let problem = result.unwrap_err();
        let field = problem
            .errors
            .first()
            .map(|e| e.field.clone())
            .unwrap_or_default();
        (problem.status.as_u16(), problem.code.to_string(), field)
    }

    #[derive(Debug, Deserialize)]
    struct Search {
        q: String,
    }

    async fn query_of(target: &str) -> Result<String, Problem> {
        let request = axum::http::Request::get(target).body(()).unwrap();
        let (mut parts, ()) = request.into_parts();
        Query::<Search>::from_request_parts(&mut parts, &())
            .await
            .map(|Query(search)| search.q)
    }

    #[tokio::test]
    async fn a_query_string_must_decode_to_utf8() {
        assert_eq!(
            query_of("/s?q=caf%C3%A9+au+lait").await.unwrap(),
            "café au lait"
        );
        assert_eq!(query_of("/s?q=100%25").await.unwrap(), "100%");
        for target in ["/s?q=%FF", "/s?q=caf%C3", "/s?q=a&x=%E9"] {
            let problem = query_of(target).await.unwrap_err();
            assert_eq!(problem.code, "invalid_query", "{target}");
        }
    }

    #[tokio::test]
    async fn a_percent_sign_must_start_an_escape() {
        assert_eq!(query_of("/s?q=%2a%2A").await.unwrap(), "**");
        for target in [
            "/s?q=city%ZZ",
            "/s?q=100%",
            "/s?q=%2",
            "/s?%ZZ=1&q=a",
            "/s?q=a&x=%G0",
        ] {
            let problem = query_of(target).await.unwrap_err();
            assert_eq!(problem.code, "invalid_query", "{target}");
            assert_eq!(problem.status, 400, "{target}");
        }
    }

    #[test]
    fn field_messages_speak_json_not_rust() {
        let cases = [
            (
                r#"{"count":"5","name":"a"}"#,
                r#"invalid type: string "5", expected a non-negative integer"#,
            ),
            (
                r#"{"count":1.5,"name":"a"}"#,
                "invalid type: number `1.5`, expected a non-negative integer",
            ),
            (
                r#"{"count":-1,"name":"a"}"#,
                "invalid value: integer `-1`, expected a non-negative integer",
            ),
            (
                r#"{"count":1,"name":5}"#,
                "invalid type: integer `5`, expected a string",
            ),
        ];
        for (body, expected) in cases {
            let problem = parse_json::<Input>(body.as_bytes()).unwrap_err();
            assert_eq!(problem.errors[0].message, expected, "{body}");
            let detail = problem.detail.unwrap_or_default();
            assert!(!detail.contains("line"), "{detail}");
        }
    }

    #[test]
    fn json_rejections_name_status_code_and_field() {
        let cases: &[(&str, u16, &str, &str)] = &[
            ("", 400, "malformed_json", ""),
            ("{", 400, "malformed_json", ""),
            ("[1]", 422, "validation_failed", "body"),
            (r#"{"name":"a"}"#, 422, "validation_failed", "count"),
            (
                r#"{"count":null,"name":"a"}"#,
                422,
                "validation_failed",
                "count",
            ),
            (
                r#"{"count":1.5,"name":"a"}"#,
                422,
                "validation_failed",
                "count",
            ),
            (
                r#"{"count":"1","name":"a"}"#,
                422,
                "validation_failed",
                "count",
            ),
            (
                r#"{"count":-1,"name":"a"}"#,
                422,
                "validation_failed",
                "count",
            ),
            (
                r#"{"count":1,"name":"a","extra":1}"#,
                422,
                "validation_failed",
                "extra",
            ),
            (
                r#"{"count":1,"name":"a","name":"b"}"#,
                422,
                "validation_failed",
                "name",
            ),
            (
                r#"{"count":1e999,"name":"a"}"#,
                422,
                "validation_failed",
                "body",
            ),
        ];
        for (body, status, code, field) in cases {
            let got = field_of(parse_json::<Input>(body.as_bytes()));
            assert_eq!(
                got,
                (*status, code.to_string(), field.to_string()),
                "body {body:?}"
            );
        }
    }

    /// Contract section 1: `errors` has "one entry per bad field", so a body with several is
    /// answered with all of them, whatever is wrong with each, each once.
    #[test]
    fn every_bad_field_is_named_once() {
        let fields = |body: &str| -> Vec<(String, String)> {
            let problem = parse_json::<Session>(body.as_bytes()).unwrap_err();
            assert_eq!(problem.status.as_u16(), 422, "{body}");
            let mut fields: Vec<(String, String)> = problem
                .errors
                .into_iter()
                .map(|e| (e.field, e.message))
                .collect();
            fields.sort();
            fields
        };
        let named = |body: &str| -> Vec<String> { fields(body).into_iter().map(|f| f.0).collect() };
        assert_eq!(named("{}"), ["language", "seconds"]);
        assert_eq!(
            named(r#"{"seconds":"60","language":5,"mood":1,"extra":2}"#),
            ["extra", "language", "mood", "seconds"]
        );
        assert_eq!(
            named(
                r#"{"seconds":1,"answers":[{"id":1,"correct":true},{"correct":"yes","grade":"meh","x":0}]}"#
            ),
            [
                "answers[0].id",
                "answers[1].correct",
                "answers[1].grade",
                "answers[1].id",
                "answers[1].x",
                "language"
            ]
        );
        assert_eq!(
            fields(r#"{"seconds":"x","language":"es","seconds":2}"#),
            [(
                "seconds".to_owned(),
                r#"invalid type: string "x", expected an integer"#.to_owned()
            )]
        );
        // The values' rules join the shape's errors, on the client's own values only: a bad
        // `language` is named beside an unknown member and a mistyped answer...
        assert_eq!(
            fields(r#"{"seconds":1,"language":"","mood":1,"answers":[{"id":"a","correct":1}]}"#),
            [
                (
                    "answers[0].correct".to_owned(),
                    "invalid type: integer `1`, expected a boolean".to_owned()
                ),
                ("language".to_owned(), "must not be empty".to_owned()),
                ("mood".to_owned(), "is not an accepted field".to_owned()),
            ]
        );
        assert_eq!(
            named(
                r#"{"seconds":-1,"language":"es","mood":1,"answers":[{"id":"a","correct":true}]}"#
            ),
            ["answers", "mood"]
        );
        // ... but a rule reading a stand-in (here `seconds`, missing: its stand-in 0 would break
        // the rule) is left out.
        assert_eq!(
            named(r#"{"language":"","answers":[{"id":"a","correct":true}]}"#),
            ["language", "seconds"]
        );
        assert_eq!(
            fields(r#"{"language":"es","answers":[{"id":"a","correct":true}]}"#),
            [("seconds".to_owned(), "is required".to_owned())]
        );
        // A body with more bad fields than readings allowed still names the first ones.
        let many: Vec<String> = (0..200)
            .map(|i| format!(r#"{{"id":{i},"correct":1}}"#))
            .collect();
        let body = format!(
            r#"{{"seconds":1,"language":"es","answers":[{}]}}"#,
            many.join(",")
        );
        let named = named(&body);
        assert!(named.len() >= 4 && named.len() <= MAX_READINGS, "{named:?}");
    }

    #[test]
    fn a_structs_declared_fields_are_known_without_a_body() {
        assert_eq!(declared_fields::<Input>(), ["count", "name"]);
        assert!(declared_fields::<serde_json::Value>().is_empty());
    }

    #[test]
    fn every_unknown_field_is_named() {
        let body = r#"{"zeta":0,"count":1,"extra":1,"name":"a","other":2}"#;
        let problem = parse_json::<Input>(body.as_bytes()).unwrap_err();
        let mut fields: Vec<&str> = problem.errors.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["extra", "other", "zeta"]);
        // A name with a backtick (serde quotes names in backticks) is reported as it is.
        let problem = parse_json::<Input>(br#"{"count":1,"x`y":1,"name":"a"}"#).unwrap_err();
        let fields: Vec<&str> = problem.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["x`y"]);
        assert!(
            problem
                .errors
                .iter()
                .all(|e| e.message == "is not an accepted field")
        );
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Session {
        seconds: i64,
        language: String,
        #[serde(default)]
        answers: Option<Vec<Answer>>,
        #[serde(default)]
        at: Option<String>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Answer {
        id: String,
        correct: bool,
        #[serde(default)]
        grade: Option<Grade>,
        weight: Option<f64>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Grade {
        Again,
        Good,
    }

    /// A rule of one field (`language` not empty) and one of two (`answers` only with a positive
    /// `seconds`), as request types have.
    impl FieldRules for Session {
        fn broken_rules(&self, stand_in: &dyn Fn(&str) -> bool) -> Vec<FieldError> {
            let mut broken = Vec::new();
            if !stand_in("language") && self.language.is_empty() {
                broken.push(FieldError::new("language", "must not be empty"));
            }
            let answered = self
                .answers
                .as_ref()
                .is_some_and(|answers| !answers.is_empty());
            if !stand_in("seconds") && !stand_in("answers") && answered && self.seconds < 1 {
                broken.push(FieldError::new("answers", "need a positive `seconds`"));
            }
            broken
        }
    }

    type Outcome = Result<Session, (u16, String, Option<String>, Vec<FieldError>)>;

    fn outcome(result: Result<Session, Problem>) -> Outcome {
        result.map_err(|p| (p.status.as_u16(), p.code.to_string(), p.detail, p.errors))
    }

    /// A field inside a list is named by its whole path, whatever is wrong with it: the contract's
    /// `answers[3].phrase_id` shape, so a client can find the answer at fault.
    #[test]
    fn a_nested_field_is_named_by_its_path() {
        let answer = r#"{"id":"a","correct":true}"#;
        let cases = [
            (r#"{"id":"b"}"#, "answers[1].correct", "is required"),
            (
                r#"{"id":"b","correct":true,"extra":1}"#,
                "answers[1].extra",
                "is not an accepted field",
            ),
            (
                r#"{"id":"b","correct":true,"correct":false}"#,
                "answers[1].correct",
                "is given more than once",
            ),
            (
                r#"{"id":"b","correct":1}"#,
                "answers[1].correct",
                "invalid type: integer `1`, expected a boolean",
            ),
        ];
        for (second, field, message) in cases {
            let body = format!(r#"{{"seconds":1,"language":"es","answers":[{answer},{second}]}}"#);
            let problem = parse_json::<Session>(body.as_bytes()).unwrap_err();
            assert_eq!(problem.status.as_u16(), 422, "{body}");
            assert_eq!(problem.errors, [FieldError::new(field, message)], "{body}");
        }
        // At the top level the field is named alone, as before.
        let problem = parse_json::<Session>(br#"{"language":"es"}"#).unwrap_err();
        assert_eq!(problem.errors, [FieldError::new("seconds", "is required")]);
    }

    /// The single parse of a body that fits gives what the checked reading gives, and every
    /// body that does not fit gets the checked reading's problem: compared on valid bodies and
    /// on every one-byte deletion, replacement and insertion of them.
    #[test]
    fn parsing_once_answers_as_the_checked_reading_does() {
        let valid = [
            r#"{"seconds":60,"language":"es"}"#,
            r#" {"seconds":-1,"language":"\u00e9s\ud83d\ude00","at":null,"answers":null} "#,
            r#"{"answers":[{"id":"a","correct":true,"grade":"good","weight":1.5e3},
                {"id":"b","correct":false,"weight":null}],"language":"es","seconds":1}"#,
        ];
        let extras = [
            r#"[60,"es"]"#,
            r#"{"seconds":1e999,"language":"es"}"#,
            r#"{"seconds":1,"language":"\ud800"}"#,
            r#"{"seconds":1,"language":"es","seconds":2}"#,
            r#"{"seconds":1,"language":"es","x":1e999}"#,
            r#"{"seconds":1,"language":"es","answers":[{"id":"a","correct":true,"weight":1e999}]}"#,
            "{\"seconds\":1,\"language\":\"\u{7}\"}",
            r#"{"seconds":1,"language":"es"} x"#,
            "",
        ];
        let bytes = b"{}[]\",:1-.ex \\nu0";
        let mut bodies: Vec<Vec<u8>> = extras.iter().map(|b| b.as_bytes().to_vec()).collect();
        for body in valid.map(str::as_bytes) {
            bodies.push(body.to_vec());
            for i in 0..body.len() {
                let mut deleted = body.to_vec();
                deleted.remove(i);
                bodies.push(deleted);
                for &b in bytes {
                    let mut replaced = body.to_vec();
                    replaced[i] = b;
                    bodies.push(replaced);
                    let mut inserted = body.to_vec();
                    inserted.insert(i, b);
                    bodies.push(inserted);
                }
            }
        }
        let mut accepted = 0;
        for body in &bodies {
            let once = outcome(parse_json::<Session>(body));
            let checked = outcome(parse_checked::<Session>(body));
            assert_eq!(once, checked, "body {:?}", String::from_utf8_lossy(body));
            accepted += usize::from(once.is_ok());
        }
        // The mutations reach both sides: many bodies still fit, most do not.
        assert!(
            accepted > 100 && accepted < bodies.len() / 2,
            "{accepted} of {}",
            bodies.len()
        );
    }

    #[test]
    fn json_content_types() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(is_json(&headers));
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!is_json(&headers));
        for utf8 in [
            "application/json;charset=\"UTF-8\"",
            "application/json; charset=us-ascii",
            "application/problem+json; v=1",
        ] {
            headers.insert(header::CONTENT_TYPE, utf8.parse().unwrap());
            assert!(is_json(&headers), "{utf8}");
        }
        for other in [
            "application/json; charset=latin1",
            "application/json; charset=utf-16",
        ] {
            headers.insert(header::CONTENT_TYPE, other.parse().unwrap());
            assert!(!is_json(&headers), "{other}");
        }
        headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        headers.append(header::CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(
            !is_json(&headers),
            "two Content-Type lines, even equal ones"
        );
    }
}
