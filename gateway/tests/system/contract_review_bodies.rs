//! Request bodies where the gateway (1 MiB) meets the services (128 KiB), media types, empty
//! bodies, and the `Location` of 201s resolved through the gateway (the contract (docs/conventions.md) "Request bodies",
//! 3 and 4).

use futures_util::stream;
use reqwest::{Body, Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::contract_review::{Sys, answer};

/// The two endpoints that take a body, with a valid body for each.
async fn writes(sys: &Sys) -> [(&'static str, Value); 2] {
    let article = sys.article_ids(1).await.remove(0);
    [
        (
            "/v1/news/comments",
            json!({"article_id": article, "text": "a body"}),
        ),
        (
            "/v1/lingo/me/study-sessions",
            json!({"duration_seconds": 60, "phrases_seen": 2, "phrases_correct": 1, "language_code": "es"}),
        ),
    ]
}

/// `value` padded with a `pad` field of `bytes` spaces inside a string: valid JSON of about
/// that size.
fn padded(value: &Value, bytes: usize) -> Vec<u8> {
    let text = serde_json::to_string(value).unwrap();
    let mut body = text[..text.len() - 1].to_owned();
    body.push_str(&format!(",\"text_pad\":\"{}\"}}", " ".repeat(bytes)));
    body.into_bytes()
}

fn chunked(body: Vec<u8>) -> Body {
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(16 * 1024).map(|c| Ok(c.to_vec())).collect();
    Body::wrap_stream(stream::iter(pieces))
}

#[tokio::test]
async fn a_body_between_the_two_limits_is_413_from_the_service_with_the_gateways_request_id() {
    let sys = Sys::start().await;
    for (path, body) in writes(&sys).await {
        for size in [129 * 1024, 200 * 1024, 1000 * 1024] {
            let bytes = padded(&body, size);
            let send = |request: RequestBuilder| {
                request
                    .header("content-type", "application/json")
                    .header("x-request-id", format!("big-{size}"))
            };
            let declared =
                answer(send(sys.req(Method::POST, path, Some("big"))).body(bytes.clone())).await;
            let id = declared.assert_problem(413, "payload_too_large", &format!("{path} {size}"));
            assert_eq!(id, format!("big-{size}"));
            let streamed =
                answer(send(sys.req(Method::POST, path, Some("big"))).body(chunked(bytes))).await;
            streamed.assert_problem(413, "payload_too_large", &format!("{path} {size} chunked"));
        }
    }
    // Nothing was recorded.
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("big")).await["total_xp"],
        0
    );
}

/// "128 KiB ... so that the longest legal comment fits in any script and any JSON encoding of
/// it: 10,000 emoji written as `\ud83d\ude00` escapes".
#[tokio::test]
async fn the_longest_legal_comment_fits_through_the_gateway_in_any_encoding() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let escaped = "\\ud83d\\ude00".repeat(10_000);
    let bodies = [
        format!("{{\"article_id\":\"{article}\",\"text\":\"{escaped}\"}}"),
        serde_json::to_string(&json!({"article_id": article, "text": "😀".repeat(10_000)}))
            .unwrap(),
        serde_json::to_string(&json!({"article_id": article, "text": "字".repeat(10_000)}))
            .unwrap(),
    ];
    for body in bodies {
        let posted = answer(
            sys.req(Method::POST, "/v1/news/comments", Some("long"))
                .header("content-type", "application/json")
                .body(body.clone()),
        )
        .await;
        assert_eq!(
            posted.status,
            StatusCode::CREATED,
            "{} bytes: {}",
            body.len(),
            posted.json()
        );
        assert_eq!(
            posted.json()["text"].as_str().unwrap().chars().count(),
            10_000
        );
    }
    let too_long = json!({"article_id": article, "text": "😀".repeat(10_001)});
    let refused = sys.post_json("/v1/news/comments", "long", &too_long).await;
    refused.assert_problem(422, "validation_failed", "10,001 characters");
}

#[tokio::test]
async fn bodies_are_json_by_their_media_type_with_or_without_parameters() {
    let sys = Sys::start().await;
    let accepted = [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "application/json ; charset=\"utf-8\"",
        "Application/JSON",
        "application/vnd.lingo+json",
    ];
    let refused = [
        "text/plain",
        "text/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        "application/json; charset=latin1",
        "application/json; charset=utf-16",
        "json",
        "",
    ];
    for (path, body) in writes(&sys).await {
        let bytes = serde_json::to_vec(&body).unwrap();
        let mut wrong = Vec::new();
        for media in accepted {
            let posted = answer(
                sys.req(Method::POST, path, Some("media"))
                    .header("content-type", media)
                    .body(bytes.clone()),
            )
            .await;
            if posted.status != StatusCode::CREATED {
                wrong.push(format!(
                    "{path} {media:?}: {} {}",
                    posted.status,
                    posted.json()
                ));
            }
        }
        for media in refused {
            let posted = answer(
                sys.req(Method::POST, path, Some("media"))
                    .header("content-type", media)
                    .body(bytes.clone()),
            )
            .await;
            if posted.status != StatusCode::UNSUPPORTED_MEDIA_TYPE {
                wrong.push(format!("{path} {media:?}: {}", posted.status));
            } else {
                posted.assert_problem(415, "unsupported_media_type", media);
            }
        }
        let no_type = answer(
            sys.req(Method::POST, path, Some("media"))
                .body(bytes.clone()),
        )
        .await;
        no_type.assert_problem(415, "unsupported_media_type", "no content type");
        let gzip = answer(
            sys.req(Method::POST, path, Some("media"))
                .header("content-type", "application/json")
                .header("content-encoding", "gzip")
                .body(bytes.clone()),
        )
        .await;
        gzip.assert_problem(415, "unsupported_media_type", "gzip");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

/// `Content-Type` is one media type (RFC 9110 8.3: a singleton field). Sent twice, the body has
/// no one type: 415 whatever the order (regression: the first line decided, so JSON then
/// `text/plain` was read as JSON and the other order refused).
#[tokio::test]
async fn a_body_labelled_with_two_content_types_is_415_in_either_order() {
    let sys = Sys::start().await;
    let pairs = [
        ["application/json", "text/plain"],
        ["text/plain", "application/json"],
        ["application/json", "application/json"],
    ];
    for (path, body) in writes(&sys).await {
        let bytes = serde_json::to_vec(&body).unwrap();
        for [first, second] in pairs {
            let posted = answer(
                sys.req(Method::POST, path, Some("two-types"))
                    .header("content-type", first)
                    .header("content-type", second)
                    .body(bytes.clone()),
            )
            .await;
            posted.assert_problem(415, "unsupported_media_type", &format!("{first}, {second}"));
        }
    }
    let article = sys.article_ids(1).await.remove(0);
    let like = answer(
        sys.req(
            Method::POST,
            &format!("/v1/news/articles/{article}/like"),
            Some("two-types"),
        )
        .header("content-type", "application/json")
        .header("content-type", "text/plain")
        .body("{}"),
    )
    .await;
    like.assert_problem(415, "unsupported_media_type", "a toggle's body");
}

#[tokio::test]
async fn an_empty_body_on_a_write_is_400_malformed_json() {
    let sys = Sys::start().await;
    for (path, _) in writes(&sys).await {
        for media in ["application/json", "application/json; charset=utf-8"] {
            let empty = answer(
                sys.req(Method::POST, path, Some("empty"))
                    .header("content-type", media)
                    .body(""),
            )
            .await;
            empty.assert_problem(400, "malformed_json", path);
        }
        let streamed = answer(
            sys.req(Method::POST, path, Some("empty"))
                .header("content-type", "application/json")
                .body(Body::wrap_stream(stream::iter(Vec::<
                    Result<Vec<u8>, std::io::Error>,
                >::new()))),
        )
        .await;
        streamed.assert_problem(400, "malformed_json", path);
        // No content type and no body: nothing to call JSON; either answer names the fault.
        let bare = answer(sys.req(Method::POST, path, Some("empty"))).await;
        let code = bare.json()["code"].as_str().unwrap_or_default().to_owned();
        assert!(
            (bare.status.as_u16(), code.as_str()) == (400, "malformed_json")
                || (bare.status.as_u16(), code.as_str()) == (415, "unsupported_media_type"),
            "{path}: {} {code}",
            bare.status
        );
        for body in ["null", "[]", "\"x\"", "1"] {
            let not_object = answer(
                sys.req(Method::POST, path, Some("empty"))
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
            let problem = not_object.json();
            not_object.assert_problem(422, "validation_failed", body);
            assert_eq!(
                problem["errors"][0]["field"], "body",
                "{path} {body}: {problem}"
            );
        }
    }
}

/// Like, bookmark and follow take no body: with `Content-Type: application/json` and no body,
/// or with `{}`, they answer as without.
#[tokio::test]
async fn toggles_take_no_body_with_or_without_a_json_content_type() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let targets = [
        format!("/v1/news/articles/{article}/like"),
        format!("/v1/news/articles/{article}/bookmark"),
        "/v1/news/journalists/jrn-0001/follow".into(),
        "/v1/news/organizations/org-001/follow".into(),
    ];
    for target in &targets {
        for method in [Method::POST, Method::DELETE] {
            let variants: [(&str, Option<&str>, &str); 5] = [
                ("nothing", None, ""),
                ("json type, empty", Some("application/json"), ""),
                (
                    "json type, charset, empty",
                    Some("application/json; charset=utf-8"),
                    "",
                ),
                ("json object", Some("application/json"), "{}"),
                ("json null", Some("application/json"), "null"),
            ];
            let mut states = Vec::new();
            for (name, media, body) in variants {
                let mut request = sys.req(method.clone(), target, Some("toggler"));
                if let Some(media) = media {
                    request = request.header("content-type", media);
                }
                if !body.is_empty() || media.is_some() {
                    request = request.body(body);
                }
                let toggled = answer(request).await;
                assert_eq!(
                    toggled.status,
                    StatusCode::OK,
                    "{method} {target} {name}: {}",
                    toggled.json()
                );
                states.push(toggled.json());
            }
            assert!(
                states.windows(2).all(|w| w[0] == w[1]),
                "{method} {target}: {states:?}"
            );
            let text = answer(
                sys.req(method.clone(), target, Some("toggler"))
                    .header("content-type", "text/plain")
                    .body("x"),
            )
            .await;
            text.assert_problem(415, "unsupported_media_type", target);
        }
    }
}

/// The `Location` of a 201 names the created resource through the gateway.
#[tokio::test]
async fn the_location_of_a_201_resolves_through_the_gateway() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let top = sys
        .post_json(
            "/v1/news/comments",
            "locator",
            &json!({"article_id": article, "text": "top"}),
        )
        .await;
    assert_eq!(top.status, StatusCode::CREATED);
    let reply = sys
        .post_json(
            "/v1/news/comments",
            "locator",
            &json!({"article_id": article, "text": "reply", "parent_id": top.json()["id"]}),
        )
        .await;
    for created in [&top, &reply] {
        let location = created.header("location").expect("a 201 has a Location");
        let id = created.json()["id"].as_str().unwrap().to_owned();
        assert_eq!(location, format!("/v1/news/comments/{id}"));
        assert_eq!(sys.get_ok(location, None).await, created.json());
        assert_eq!(sys.get_ok(location, Some("someone")).await, created.json());
    }
    let session = sys.study("locator", "fr").await;
    assert_eq!(session.status, StatusCode::CREATED);
    let location = session.header("location").unwrap();
    let id = session.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/v1/lingo/me/study-sessions/{id}"));
    let fetched = sys.get_ok(location, Some("locator")).await;
    let mut created = session.json();
    for field in ["total_xp", "level", "leveled_up"] {
        created.as_object_mut().unwrap().remove(field);
    }
    assert_eq!(
        fetched, created,
        "the session at its Location is the one created"
    );
}

/// Unknown and repeated fields are 422, the server-set ones (`learner_id`, `author_id`)
/// included, through the gateway.
#[tokio::test]
async fn fields_the_server_sets_are_refused_by_name() {
    let sys = Sys::start().await;
    for (path, body) in writes(&sys).await {
        for field in ["learner_id", "author_id", "id", "created_at"] {
            let mut with = body.clone();
            with[field] = json!("bob");
            let refused = sys.post_json(path, "fields", &with).await;
            refused.assert_problem(422, "validation_failed", field);
            let named: Vec<Value> = refused.json()["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["field"].clone())
                .collect();
            assert!(named.contains(&json!(field)), "{path} {field}: {named:?}");
        }
        let text = serde_json::to_string(&body).unwrap();
        let repeated = format!("{},{}", &text[..text.len() - 1], &text[1..]);
        let refused = answer(
            sys.req(Method::POST, path, Some("fields"))
                .header("content-type", "application/json")
                .body(repeated),
        )
        .await;
        refused.assert_problem(422, "validation_failed", "repeated fields");
    }
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("fields")).await["total_xp"],
        0
    );
}

/// "They stay exactly equal to the rows they count whoever writes those rows: the service under
/// any mix of concurrent calls": likes, bookmarks and follows by many readers at once through
/// the gateway, repeated and undone, leave counts equal to what stays.
#[tokio::test]
async fn counts_stay_exact_under_concurrent_toggles_through_the_gateway() {
    use futures_util::future::join_all;
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let targets = [
        format!("/v1/news/articles/{article}/like"),
        format!("/v1/news/articles/{article}/bookmark"),
        "/v1/news/journalists/jrn-0007/follow".to_owned(),
        "/v1/news/organizations/org-007/follow".to_owned(),
    ];
    // Reader n does POST twice; even readers then DELETE twice; all at once.
    let calls = (0..24).map(|n| {
        let mut methods = vec![Method::POST, Method::POST];
        if n % 2 == 0 {
            methods.extend([Method::DELETE, Method::DELETE]);
        }
        let targets = targets.clone();
        let sys = &sys;
        async move {
            for method in methods {
                for target in &targets {
                    let done =
                        answer(sys.req(method.clone(), target, Some(&format!("toggler-{n}"))))
                            .await;
                    assert_eq!(done.status, StatusCode::OK, "{method} {target}");
                }
            }
        }
    });
    join_all(calls).await;
    let read = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("counter"))
        .await;
    assert_eq!(read["like_count"], 12);
    assert_eq!(read["bookmark_count"], 12);
    let journalists = sys
        .get_ok(
            "/v1/news/journalists?organization_id=org-007&limit=100",
            Some("counter"),
        )
        .await;
    let journalist = journalists["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == "jrn-0007")
        .unwrap();
    assert_eq!(journalist["follower_count"], 12);
    let organizations = sys
        .get_ok("/v1/news/organizations?limit=100", Some("counter"))
        .await;
    let organization = organizations["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "org-007")
        .unwrap();
    assert_eq!(organization["follower_count"], 12);
    let repeat = answer(sys.req(Method::POST, &targets[0], Some("toggler-1"))).await;
    assert_eq!(
        repeat.json(),
        json!({"article_id": article, "liked": true, "like_count": 12})
    );
}

/// A body sent anyway to like, bookmark or follow is judged by the same rules (conventions:
/// "read and ignored, under the same rules: JSON, within the size limit, declared or sent in
/// chunks"): over 128 KiB it is 413, declared or chunked, and nothing changes.
#[tokio::test]
async fn a_toggle_with_a_body_over_the_limit_is_413_and_changes_nothing() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let target = format!("/v1/news/articles/{article}/like");
    let mut big = b"{\"x\":\"".to_vec();
    big.resize(200 * 1024, b'a');
    big.extend_from_slice(b"\"}");
    let declared = answer(
        sys.req(Method::POST, &target, Some("heavy"))
            .header("content-type", "application/json")
            .body(big.clone()),
    )
    .await;
    declared.assert_problem(413, "payload_too_large", "declared");
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(8 * 1024).map(|c| Ok(c.to_vec())).collect();
    let streamed = answer(
        sys.req(Method::POST, &target, Some("heavy"))
            .header("content-type", "application/json")
            .body(Body::wrap_stream(stream::iter(pieces))),
    )
    .await;
    streamed.assert_problem(413, "payload_too_large", "chunked");
    let read = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("heavy"))
        .await;
    assert_eq!(
        read["viewer"]["liked"], false,
        "a refused like changed something"
    );
}

/// Timestamps sent with an offset come back in UTC with a `Z` (the contract (docs/conventions.md): "Timestamps are RFC
/// 3339 in UTC with a `Z`"), through the gateway.
#[tokio::test]
async fn a_studied_at_with_an_offset_comes_back_in_utc() {
    let sys = Sys::start().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Two days ago at 10:00 in UTC+02:00, that is 08:00Z.
    let day = (now / 86_400 - 2) as i64;
    let (year, month, date) = civil_from_days(day);
    let local = format!("{year:04}-{month:02}-{date:02}T10:00:00+02:00");
    let utc = format!("{year:04}-{month:02}-{date:02}T08:00:00Z");
    let session = json!({"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1,
        "language_code": "es", "studied_at": local});
    let created = sys
        .post_json("/v1/lingo/me/study-sessions", "zoned", &session)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    assert_eq!(created.json()["studied_at"], utc.as_str());
    let created_at = created.json()["created_at"].as_str().unwrap().to_owned();
    assert!(created_at.ends_with('Z'), "{created_at}");
    let listed = sys
        .get_ok("/v1/lingo/me/study-sessions", Some("zoned"))
        .await;
    assert_eq!(listed["data"][0]["studied_at"], utc.as_str());
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// algorithm), so the test needs no date crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
