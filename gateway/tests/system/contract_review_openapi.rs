//! The OpenAPI document the gateway serves (`GET /openapi.json`) against real answers through
//! the gateway: every status answered is documented for its operation, with the content type
//! documented, and every body validates against the documented schema (a small JSON Schema
//! check written here: `$ref`, `allOf`/`oneOf`/`anyOf`, `type`, `required`, `properties`,
//! `additionalProperties`, `items`, `enum`, bounds, lengths, `date-time` and `uuid`).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::contract_review::{Answer, Sys, answer};
use crate::contract_review_head::get_endpoints;

/// Checks `value` against `schema`; pushes one line per violation.
fn check(document: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        let target = &document["components"]["schemas"][name];
        assert!(target.is_object(), "unresolved {reference}");
        check(document, target, value, at, errors);
    }
    if let Some(all) = schema["allOf"].as_array() {
        for part in all {
            check(document, part, value, at, errors);
        }
    }
    for (keyword, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(alternatives) = schema[keyword].as_array() {
            let matching = alternatives
                .iter()
                .filter(|alternative| {
                    let mut inner = Vec::new();
                    check(document, alternative, value, at, &mut inner);
                    inner.is_empty()
                })
                .count();
            if matching == 0 || (exactly_one && matching > 1) {
                errors.push(format!("{at}: {matching} of the {keyword} match {value}"));
            }
        }
    }
    if let Some(types) = schema.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !allowed.iter().any(|t| is_type(value, t)) {
            errors.push(format!("{at}: {value} is not {allowed:?}"));
            return;
        }
    }
    if let Some(choices) = schema["enum"].as_array()
        && !choices.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {choices:?}"));
    }
    match value {
        Value::Object(object) => {
            for field in schema["required"].as_array().into_iter().flatten() {
                let field = field.as_str().unwrap();
                if !object.contains_key(field) {
                    errors.push(format!("{at}: required `{field}` is missing"));
                }
            }
            let properties = schema["properties"].as_object();
            for (key, item) in object {
                match properties.and_then(|p| p.get(key)) {
                    Some(property) => {
                        check(document, property, item, &format!("{at}.{key}"), errors)
                    }
                    None => match &schema["additionalProperties"] {
                        Value::Bool(false) => {
                            errors.push(format!("{at}: `{key}` is not documented"))
                        }
                        extra @ Value::Object(_) => {
                            check(document, extra, item, &format!("{at}.{key}"), errors)
                        }
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                if schema["items"].is_object() {
                    check(
                        document,
                        &schema["items"],
                        item,
                        &format!("{at}[{n}]"),
                        errors,
                    );
                }
            }
            bound(
                at,
                items.len() as f64,
                &schema["minItems"],
                &schema["maxItems"],
                errors,
            );
        }
        Value::Number(number) => {
            bound(
                at,
                number.as_f64().unwrap(),
                &schema["minimum"],
                &schema["maximum"],
                errors,
            );
        }
        Value::String(text) => {
            let length = text.chars().count() as f64;
            bound(
                at,
                length,
                &schema["minLength"],
                &schema["maxLength"],
                errors,
            );
            match schema["format"].as_str() {
                Some("date-time") if !is_utc_timestamp(text) => {
                    errors.push(format!("{at}: {text:?} is not RFC 3339 UTC with Z"))
                }
                Some("uuid") if !is_uuid(text) => {
                    errors.push(format!("{at}: {text:?} is not a UUID"))
                }
                _ => {}
            }
        }
        _ => {}
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => false,
    }
}

fn bound(at: &str, value: f64, min: &Value, max: &Value, errors: &mut Vec<String>) {
    if min.as_f64().is_some_and(|min| value < min) || max.as_f64().is_some_and(|max| value > max) {
        errors.push(format!("{at}: {value} outside [{min}, {max}]"));
    }
}

/// `2026-11-21T09:30:00Z` or with a fraction: the contract's timestamps.
fn is_utc_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        range
            .clone()
            .all(|i| bytes.get(i).is_some_and(u8::is_ascii_digit))
    };
    text.len() >= 20
        && text.ends_with('Z')
        && digits(0..4)
        && bytes[4] == b'-'
        && digits(5..7)
        && bytes[7] == b'-'
        && digits(8..10)
        && bytes[10] == b'T'
        && digits(11..13)
        && bytes[13] == b':'
        && digits(14..16)
        && bytes[16] == b':'
        && digits(17..19)
        && (text.len() == 20 || (bytes[19] == b'.' && digits(20..text.len() - 1)))
}

fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

/// The document's template for a concrete path: fixed segments literally, `{x}` any segment.
fn template<'a>(document: &'a Value, path: &str) -> Option<&'a str> {
    let path = path.split('?').next().unwrap();
    let segments: Vec<&str> = path.split('/').collect();
    document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .find(|candidate| {
            let pattern: Vec<&str> = candidate.split('/').collect();
            pattern.len() == segments.len()
                && pattern
                    .iter()
                    .zip(&segments)
                    .all(|(p, s)| (p.starts_with('{') && !s.is_empty()) || p == s)
        })
}

/// Judges one answer against the document; returns the violations.
fn judge(document: &Value, method: &Method, path: &str, answer: &Answer) -> Vec<String> {
    let context = format!("{method} {path} -> {}", answer.status.as_u16());
    let Some(template) = template(document, path) else {
        return vec![format!("{context}: no documented path")];
    };
    let operation = &document["paths"][template][method.as_str().to_ascii_lowercase()];
    if !operation.is_object() {
        return vec![format!("{context}: method not documented")];
    }
    let status = answer.status.as_u16().to_string();
    let response = &operation["responses"][&status];
    let response = if response.is_object() {
        response
    } else {
        &operation["responses"]["default"]
    };
    if !response.is_object() {
        return vec![format!("{context}: status not documented for {template}")];
    }
    let mut errors = Vec::new();
    if answer.bytes.is_empty() {
        if response["content"]
            .as_object()
            .is_some_and(|c| !c.is_empty())
            && method != Method::HEAD
        {
            errors.push(format!(
                "{context}: documented with a body, answered without"
            ));
        }
        return errors;
    }
    let media = answer.header("content-type").unwrap_or_default();
    let media = media.split(';').next().unwrap().trim();
    let Some(schema) = response["content"][media]["schema"].as_object() else {
        return vec![format!(
            "{context}: content type {media} not documented (documented: {:?})",
            response["content"]
                .as_object()
                .map(|c| c.keys().collect::<Vec<_>>())
        )];
    };
    check(
        document,
        &Value::Object(schema.clone()),
        &answer.json(),
        &context,
        &mut errors,
    );
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        if header["required"] == true && answer.header(name).is_none() {
            errors.push(format!("{context}: required header {name} is missing"));
        }
    }
    errors
}

/// Rows for every list and personal answer: answered sessions, follows, bookmarks, comments.
async fn fill(sys: &Sys) -> (String, String) {
    let article = sys.article_ids(1).await.remove(0);
    let answers = json!([
        {"phrase_id": "ph-es-001", "correct": true, "grade": "easy"},
        {"phrase_id": "ph-es-002", "correct": false},
        {"phrase_id": "ph-es-001", "correct": true},
    ]);
    let session = json!({"duration_seconds": 90, "phrases_seen": 3, "phrases_correct": 2,
        "language_code": "es", "answers": answers, "studied_at": "2026-11-20T10:00:00Z"});
    let created = sys
        .post_json("/v1/lingo/me/study-sessions", "header", &session)
        .await;
    let in_range = created.status == StatusCode::CREATED;
    if !in_range {
        // `studied_at` more than 30 days old where this runs: send it as now.
        let mut now = session.clone();
        now.as_object_mut().unwrap().remove("studied_at");
        let created = sys
            .post_json("/v1/lingo/me/study-sessions", "header", &now)
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    }
    for target in [
        format!("/v1/news/articles/{article}/like"),
        format!("/v1/news/articles/{article}/bookmark"),
        "/v1/news/journalists/jrn-0001/follow".into(),
        "/v1/news/organizations/org-001/follow".into(),
    ] {
        let done = answer(sys.req(Method::POST, &target, Some("header"))).await;
        assert_eq!(done.status, StatusCode::OK);
    }
    let comment = sys
        .post_json(
            "/v1/news/comments",
            "header",
            &json!({"article_id": article, "text": "documented"}),
        )
        .await;
    (article, comment.json()["id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn every_get_answer_validates_against_the_served_document() {
    let sys = Sys::start().await;
    let document = sys.get_ok("/openapi.json", None).await;
    fill(&sys).await;
    let mut errors = Vec::new();
    let mut judged = 0;
    for (path, bearer) in get_endpoints(&sys).await {
        for url in [
            path.clone(),
            format!(
                "{path}{}limit=2",
                if path.contains('?') { '&' } else { '?' }
            ),
        ] {
            let mut request = sys.req(Method::GET, &url, None);
            if let Some(bearer) = &bearer {
                request = request.bearer_auth(bearer);
            }
            let got = answer(request).await;
            errors.extend(judge(&document, &Method::GET, &url, &got));
            judged += 1;
            if let Some(etag) = got.header("etag") {
                let not_modified = answer(
                    sys.req(Method::GET, &url, None)
                        .header("if-none-match", etag),
                )
                .await;
                errors.extend(judge(&document, &Method::GET, &url, &not_modified));
            }
        }
    }
    // Searches with and without hits (a suggestion), recommendations of a seeded learner.
    for (url, who) in [
        ("/v1/news/search?q=electon", None),
        ("/v1/news/search?q=housing&sort=newest", Some("header")),
        ("/v1/lingo/me/recommendations", Some("learner-001")),
        ("/v1/lingo/me/reviews?language=es", Some("header")),
        ("/v1/lingo/me/phrases?due=true", Some("header")),
        ("/v1/lingo/phrases?q=donde%20esta", None),
    ] {
        let got = sys.get(url, who).await;
        assert_eq!(got.status, StatusCode::OK, "{url}");
        errors.extend(judge(&document, &Method::GET, url, &got));
    }
    let analytics = token_with_scope("analyst", "lingo:analytics");
    for url in [
        "/v1/lingo/analytics/progress",
        "/v1/lingo/analytics/phrase-progress",
    ] {
        let got = answer(sys.req(Method::GET, url, None).bearer_auth(&analytics)).await;
        assert!(got.json()["count"].as_u64().unwrap() > 0, "{url}");
        errors.extend(judge(&document, &Method::GET, url, &got));
    }
    assert!(judged > 40, "{judged}");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A request: method, path, bearer token, and a body with its media type.
type Case<'a> = (Method, String, Option<String>, Option<(&'a str, String)>);

#[tokio::test]
async fn writes_and_problems_validate_against_the_served_document() {
    let sys = Sys::start().await;
    let document = sys.get_ok("/openapi.json", None).await;
    let (article, comment) = fill(&sys).await;
    let session = json!({"duration_seconds": 60, "phrases_seen": 2, "phrases_correct": 1, "language_code": "fr"});
    let big = "x".repeat(200 * 1024);
    let cases: Vec<Case> = vec![
        // Successes of writes.
        (Method::POST, "/v1/lingo/me/study-sessions".into(), Some(token("w")), Some(("application/json", session.to_string()))),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("application/json", json!({"article_id": article, "text": "t", "parent_id": comment}).to_string()))),
        (Method::POST, format!("/v1/news/articles/{article}/like"), Some(token("w")), None),
        (Method::DELETE, format!("/v1/news/articles/{article}/like"), Some(token("w")), None),
        (Method::POST, format!("/v1/news/articles/{article}/bookmark"), Some(token("w")), None),
        (Method::DELETE, format!("/v1/news/articles/{article}/bookmark"), Some(token("w")), None),
        (Method::POST, "/v1/news/journalists/jrn-0002/follow".into(), Some(token("w")), None),
        (Method::DELETE, "/v1/news/journalists/jrn-0002/follow".into(), Some(token("w")), None),
        (Method::POST, "/v1/news/organizations/org-002/follow".into(), Some(token("w")), None),
        (Method::DELETE, "/v1/news/organizations/org-002/follow".into(), Some(token("w")), None),
        // Problems of the services.
        (Method::GET, "/v1/news/articles/art-none".into(), None, None),
        (Method::GET, "/v1/news/articles/art-none/comments".into(), None, None),
        (Method::GET, "/v1/news/comments/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(), None, None),
        (Method::GET, "/v1/lingo/phrases/none".into(), None, None),
        (Method::GET, "/v1/lingo/me/study-sessions/none".into(), Some(token("w")), None),
        (Method::POST, "/v1/news/articles/art-none/like".into(), Some(token("w")), None),
        (Method::POST, "/v1/news/journalists/none/follow".into(), Some(token("w")), None),
        (Method::DELETE, "/v1/news/organizations/none/follow".into(), Some(token("w")), None),
        (Method::GET, "/v1/news/articles?limit=0".into(), None, None),
        (Method::GET, "/v1/lingo/phrases?cursor=zz".into(), None, None),
        (Method::GET, "/v1/news/search".into(), None, None),
        (Method::POST, "/v1/lingo/me/study-sessions".into(), Some(token("w")), Some(("application/json", json!({"duration_seconds": 0, "phrases_seen": 1, "phrases_correct": 3, "language_code": "es", "extra": 1}).to_string()))),
        (Method::POST, "/v1/lingo/me/study-sessions".into(), Some(token("w")), Some(("application/json", json!({"duration_seconds": 5, "phrases_seen": 1, "phrases_correct": 1, "language_code": "xx"}).to_string()))),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("application/json", json!({"article_id": "none", "text": "t"}).to_string()))),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("application/json", "{".into()))),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("text/plain", "{}".into()))),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("application/json", json!({"article_id": article, "text": big}).to_string()))),
        // Problems of the gateway.
        (Method::GET, "/v1/lingo/me/xp".into(), None, None),
        (Method::GET, "/v1/news/articles".into(), Some("bad".into()), None),
        (Method::GET, "/v1/lingo/analytics/progress".into(), Some(token("w")), None),
        (Method::POST, "/v1/news/comments".into(), Some(token("w")), Some(("application/json", " ".repeat(2 * 1024 * 1024)))),
    ];
    let mut errors = Vec::new();
    for (method, path, bearer, body) in cases {
        let mut request = sys.req(method.clone(), &path, None);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        if let Some((media, body)) = body {
            request = request.header("content-type", media).body(body);
        }
        let got = answer(request).await;
        errors.extend(judge(&document, &method, &path, &got));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_checker_itself_finds_what_it_must() {
    let document = json!({"components": {"schemas": {"A": {"type": "object", "required": ["id", "at"],
        "properties": {"id": {"type": "string", "format": "uuid"}, "at": {"type": "string", "format": "date-time"},
        "n": {"type": ["integer", "null"], "minimum": 0}, "v": {"oneOf": [{"$ref": "#/components/schemas/B"}, {"type": "null"}]}}},
        "B": {"type": "object", "required": ["x"], "properties": {"x": {"type": "boolean"}}}}}});
    let schema = json!({"$ref": "#/components/schemas/A"});
    let run = |value: Value| {
        let mut errors = Vec::new();
        check(&document, &schema, &value, "$", &mut errors);
        errors
    };
    assert!(run(json!({"id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "at": "2026-11-21T09:30:00.5Z", "n": null, "v": {"x": true}})).is_empty());
    assert_eq!(
        run(json!({"id": "x", "at": "2026-11-21T09:30:00+00:00", "n": -1, "v": {"x": 1}})).len(),
        4
    );
    assert_eq!(run(json!({"n": 1.5})).len(), 3);
}
