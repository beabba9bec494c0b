//! Identity and request ids where the gateway meets the services (the contract (docs/authentication.md): "Identity comes from
//! the verified token only. No service trusts an identity header; the gateway forwards the
//! `Authorization` header unchanged and each service verifies it again itself"; "Outcomes,
//! identical at the gateway and at each service"; 1: "Every response carries `x-request-id`...
//! the gateway forwards it").

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shared_auth::testing::{TEST_SECRET, default_claims, token, token_with_claims};

use crate::contract_review::{Answer, Sys, answer};

/// Headers some proxies use to carry an identity; none may change who the caller is.
const IDENTITY_HEADERS: [&str; 6] = [
    "x-user-id",
    "x-forwarded-user",
    "x-remote-user",
    "x-auth-request-user",
    "remote-user",
    "x-learner-id",
];

fn claiming_bob(mut request: RequestBuilder) -> RequestBuilder {
    for name in IDENTITY_HEADERS {
        request = request.header(name, "bob");
    }
    request
}

#[tokio::test]
async fn identity_headers_never_change_who_the_caller_is() {
    let sys = Sys::start().await;
    // With alice's token, every read and write is alice's.
    let xp = answer(claiming_bob(sys.req(
        Method::GET,
        "/v1/lingo/me/xp",
        Some("alice"),
    )))
    .await;
    assert_eq!(xp.json()["learner_id"], "alice");
    let session = json!({"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1, "language_code": "es"});
    let created = answer(claiming_bob(
        sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("alice"))
            .json(&session),
    ))
    .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("bob")).await["total_xp"],
        0
    );
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("alice")).await["total_xp"],
        11
    );
    let article = sys.article_ids(1).await.remove(0);
    let comment = answer(claiming_bob(
        sys.req(Method::POST, "/v1/news/comments", Some("alice"))
            .json(&json!({"article_id": article, "text": "hi"})),
    ))
    .await;
    assert_eq!(comment.json()["author_id"], "alice");
    let like = answer(claiming_bob(sys.req(
        Method::POST,
        &format!("/v1/news/articles/{article}/like"),
        Some("alice"),
    )))
    .await;
    assert_eq!(like.status, StatusCode::OK);
    let as_bob = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("bob"))
        .await;
    assert_eq!(as_bob["viewer"]["liked"], false, "bob did not like it");

    // Without a token, an identity header is no identity: at the gateway and at the service.
    for path in ["/v1/lingo/me/xp", "/v1/news/me/feed"] {
        let through = answer(claiming_bob(sys.req(Method::GET, path, None))).await;
        through.assert_problem(401, "missing_token", path);
        let direct = answer(claiming_bob(sys.direct(Method::GET, path))).await;
        direct.assert_problem(401, "missing_token", path);
    }
    // An optional read with an identity header is anonymous.
    let anonymous = answer(claiming_bob(sys.req(
        Method::GET,
        &format!("/v1/news/articles/{article}"),
        None,
    )))
    .await;
    assert!(anonymous.json()["viewer"].is_null());
}

/// Two `Authorization` headers (two tokens) are refused, never one of them picked.
#[tokio::test]
async fn two_authorization_headers_are_refused_at_the_gateway_and_the_service() {
    let sys = Sys::start().await;
    let (alice, bob) = (token("alice"), token("bob"));
    for path in [
        "/v1/lingo/me/xp",
        "/v1/news/articles",
        "/v1/lingo/languages",
    ] {
        for (first, second) in [(&alice, &bob), (&bob, &alice), (&alice, &alice)] {
            let two = |request: RequestBuilder| {
                request
                    .header("authorization", format!("Bearer {first}"))
                    .header("authorization", format!("Bearer {second}"))
            };
            let through = answer(two(sys.req(Method::GET, path, None))).await;
            through.assert_problem(401, "invalid_authorization_header", path);
            assert_eq!(
                through.header("www-authenticate"),
                Some("Bearer realm=\"lingo-news\", error=\"invalid_request\"")
            );
            let direct = answer(two(sys.direct(Method::GET, path))).await;
            direct.assert_problem(401, "invalid_authorization_header", path);
        }
        for value in [
            format!("Bearer {alice}, Bearer {bob}"),
            format!("Bearer {alice} {bob}"),
            format!("Bearer {alice},{bob}"),
        ] {
            let through = answer(
                sys.req(Method::GET, path, None)
                    .header("authorization", &value),
            )
            .await;
            // "header present but not `Bearer <token>` (empty, other scheme, two tokens)".
            let context = format!("{path} {}", &value[..40]);
            through.assert_problem(401, "invalid_authorization_header", &context);
            let direct = answer(
                sys.direct(Method::GET, path)
                    .header("authorization", &value),
            )
            .await;
            direct.assert_problem(401, "invalid_authorization_header", &context);
        }
    }
}

/// HS256 over `header.claims` with the test secret, for headers `jsonwebtoken` cannot write.
fn sign(header: &Value, claims: &Value) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
    let input = format!("{}.{}", part(header), part(claims));
    let mut key = [0u8; 64];
    key[..TEST_SECRET.len()].copy_from_slice(TEST_SECRET.as_bytes());
    let pad = |byte: u8| key.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(input.as_bytes())
        .finalize();
    let mac = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac))
}

fn claims_with(sub: &str, change: impl FnOnce(&mut Value)) -> Value {
    let mut claims = default_claims(sub);
    change(&mut claims);
    claims
}

/// `Authorization` values from well-formed to broken; each must get the same outcome at the
/// gateway and at the service.
fn authorization_cases() -> Vec<(String, String)> {
    let now = jsonwebtoken::get_current_timestamp();
    let valid = token("case-user");
    let hs = json!({"alg": "HS256", "typ": "JWT"});
    let signed = |claims: Value| token_with_claims(claims);
    let mut cases: Vec<(String, String)> = vec![
        ("valid".into(), format!("Bearer {valid}")),
        ("lower-case scheme".into(), format!("bearer {valid}")),
        ("upper-case scheme".into(), format!("BEARER {valid}")),
        ("two spaces".into(), format!("Bearer  {valid}")),
        ("tab".into(), format!("Bearer\t{valid}")),
        ("trailing space".into(), format!("Bearer {valid} ")),
        ("scheme only".into(), "Bearer".into()),
        ("scheme and space".into(), "Bearer ".into()),
        ("other scheme".into(), format!("Token {valid}")),
        ("basic".into(), "Basic YTpi".into()),
        ("empty".into(), String::new()),
        ("garbage token".into(), "Bearer abc".into()),
        ("extra segment".into(), format!("Bearer {valid}.x")),
        (
            "signature cut".into(),
            format!("Bearer {}", &valid[..valid.len() - 3]),
        ),
    ];
    let claims_cases: Vec<(&str, Value)> = vec![
        (
            "expired past leeway",
            claims_with("u", |c| c["exp"] = json!(now - 300)),
        ),
        (
            "expired within leeway",
            claims_with("u", |c| c["exp"] = json!(now - 20)),
        ),
        (
            "nbf ahead",
            claims_with("u", |c| c["nbf"] = json!(now + 600)),
        ),
        (
            "nbf within leeway",
            claims_with("u", |c| c["nbf"] = json!(now + 20)),
        ),
        (
            "iat ahead",
            claims_with("u", |c| c["iat"] = json!(now + 600)),
        ),
        (
            "exp as string",
            claims_with("u", |c| c["exp"] = json!((now + 600).to_string())),
        ),
        (
            "exp fractional",
            claims_with("u", |c| c["exp"] = json!(now as f64 + 600.5)),
        ),
        (
            "no exp",
            claims_with("u", |c| drop(c.as_object_mut().unwrap().remove("exp"))),
        ),
        (
            "wrong iss",
            claims_with("u", |c| c["iss"] = json!("someone-else")),
        ),
        (
            "iss array",
            claims_with("u", |c| c["iss"] = json!(["lingo-news-dev"])),
        ),
        (
            "no iss",
            claims_with("u", |c| drop(c.as_object_mut().unwrap().remove("iss"))),
        ),
        ("wrong aud", claims_with("u", |c| c["aud"] = json!("other"))),
        (
            "aud array with ours",
            claims_with("u", |c| c["aud"] = json!(["x", "lingo-news"])),
        ),
        (
            "aud array without ours",
            claims_with("u", |c| c["aud"] = json!(["x", "y"])),
        ),
        (
            "no sub",
            claims_with("u", |c| drop(c.as_object_mut().unwrap().remove("sub"))),
        ),
        ("empty sub", claims_with("", |_| {})),
        ("sub 255", claims_with(&"s".repeat(255), |_| {})),
        ("sub 256", claims_with(&"s".repeat(256), |_| {})),
        ("sub with NUL", claims_with("a\u{0}b", |_| {})),
        ("sub with newline", claims_with("a\nb", |_| {})),
        ("sub with DEL", claims_with("a\u{7f}b", |_| {})),
        ("sub unicode", claims_with("élève-😀", |_| {})),
        ("sub number", claims_with("u", |c| c["sub"] = json!(42))),
        (
            "scope string",
            claims_with("u", |c| c["scope"] = json!("lingo:analytics other")),
        ),
        (
            "scope prefix",
            claims_with("u", |c| c["scope"] = json!("lingo:analyticsx")),
        ),
        (
            "scope array",
            claims_with("u", |c| c["scope"] = json!(["lingo:analytics"])),
        ),
    ];
    for (name, claims) in claims_cases {
        cases.push((name.into(), format!("Bearer {}", signed(claims))));
    }
    let base = default_claims("hdr-user");
    let header_cases = [
        (
            "crit",
            json!({"alg": "HS256", "typ": "JWT", "crit": ["exp"]}),
        ),
        ("alg none", json!({"alg": "none", "typ": "JWT"})),
        ("alg HS512", json!({"alg": "HS512", "typ": "JWT"})),
        ("alg RS256", json!({"alg": "RS256", "typ": "JWT"})),
        ("kid", json!({"alg": "HS256", "typ": "JWT", "kid": "k1"})),
        ("typ other", json!({"alg": "HS256", "typ": "at+jwt"})),
        ("plain HS256", hs),
    ];
    for (name, header) in header_cases {
        cases.push((name.into(), format!("Bearer {}", sign(&header, &base))));
    }
    let huge = claims_with("big", |c| c["pad"] = json!("p".repeat(9000)));
    cases.push(("over 8 KiB".into(), format!("Bearer {}", signed(huge))));
    cases
}

/// What a client can tell about authentication from an answer.
fn outcome(answer: &Answer) -> (u16, String, String, String) {
    let body = answer.json();
    let who = body["learner_id"]
        .as_str()
        .or(body["data"][0]["learner_id"].as_str())
        .unwrap_or_default()
        .to_owned();
    let www = answer.header("www-authenticate").unwrap_or_default();
    // The description's wording is free; the rest of the challenge is the contract's.
    let www = www.split(", error_description=").next().unwrap().to_owned();
    (
        answer.status.as_u16(),
        body["code"].as_str().unwrap_or_default().to_owned(),
        www,
        who,
    )
}

#[tokio::test]
async fn every_credential_gets_the_same_outcome_at_the_gateway_and_at_the_service() {
    let sys = Sys::start().await;
    let paths = [
        "/v1/lingo/me/xp",
        "/v1/news/me/following",
        "/v1/news/articles?limit=1",
        "/v1/lingo/languages",
        "/v1/lingo/analytics/progress?limit=1",
    ];
    let mut differences = Vec::new();
    for (name, value) in authorization_cases() {
        for path in paths {
            let through = answer(
                sys.req(Method::GET, path, None)
                    .header("authorization", &value),
            )
            .await;
            let direct = answer(
                sys.direct(Method::GET, path)
                    .header("authorization", &value),
            )
            .await;
            if outcome(&through) != outcome(&direct) {
                differences.push(format!(
                    "{name} on {path}: gateway {:?}, service {:?}",
                    outcome(&through),
                    outcome(&direct)
                ));
            }
            if through.status.is_client_error() {
                through.assert_problem(
                    through.status.as_u16(),
                    outcome(&through).1.as_str(),
                    &name,
                );
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The verdicts the contract fixes, at the gateway.
#[tokio::test]
async fn the_contract_verdicts_on_credentials_hold_through_the_gateway() {
    let sys = Sys::start().await;
    let cases: Vec<(String, String)> = authorization_cases();
    let verdict = |name: &str| -> Option<(u16, &str)> {
        Some(match name {
            "valid"
            | "expired within leeway"
            | "nbf within leeway"
            | "aud array with ours"
            | "sub 255"
            | "sub unicode"
            | "exp fractional" => (200, ""),
            "scheme only" | "scheme and space" | "other scheme" | "basic" | "empty" => {
                (401, "invalid_authorization_header")
            }
            "garbage token"
            | "extra segment"
            | "signature cut"
            | "expired past leeway"
            | "nbf ahead"
            | "exp as string"
            | "no exp"
            | "wrong iss"
            | "iss array"
            | "no iss"
            | "wrong aud"
            | "aud array without ours"
            | "no sub"
            | "empty sub"
            | "sub 256"
            | "sub with NUL"
            | "sub with newline"
            | "sub with DEL"
            | "sub number"
            | "crit"
            | "alg none"
            | "alg RS256"
            | "over 8 KiB" => (401, "invalid_token"),
            _ => return None,
        })
    };
    let mut wrong = Vec::new();
    for (name, value) in &cases {
        let Some((status, code)) = verdict(name) else {
            continue;
        };
        let got = answer(
            sys.req(Method::GET, "/v1/lingo/me/xp", None)
                .header("authorization", value),
        )
        .await;
        let got_code = got.json()["code"].as_str().unwrap_or_default().to_owned();
        if (got.status.as_u16(), got_code.as_str()) != (status, code) {
            wrong.push(format!("{name}: {} {got_code}", got.status));
        }
        if status == 401 && code == "invalid_token" {
            let www = got.header("www-authenticate").unwrap_or_default();
            if !www.starts_with(
                "Bearer realm=\"lingo-news\", error=\"invalid_token\", error_description=\"",
            ) {
                wrong.push(format!("{name}: WWW-Authenticate {www}"));
            }
        }
    }
    // Scopes: a scope among others suffices, a longer word is not the scope.
    for (name, status) in [("scope string", 200), ("scope prefix", 403), ("valid", 403)] {
        let value = &cases.iter().find(|(n, _)| n == name).unwrap().1;
        let got = answer(
            sys.req(Method::GET, "/v1/lingo/analytics/progress", None)
                .header("authorization", value),
        )
        .await;
        if got.status.as_u16() != status {
            wrong.push(format!("analytics with {name}: {}", got.status));
        }
        if status == 403 {
            got.assert_problem(403, "insufficient_scope", name);
            assert_eq!(
                got.header("www-authenticate"),
                Some(
                    "Bearer realm=\"lingo-news\", error=\"insufficient_scope\", scope=\"lingo:analytics\""
                )
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The id of a request is one end to end: the gateway's `x-request-id` header and the
/// service's problem `request_id` agree, for problems made by the service and by the gateway,
/// with the client's own id, without one, and with one that is not sane.
#[tokio::test]
async fn one_request_id_end_to_end_for_problems_of_the_service_and_of_the_gateway() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let big = json!({"article_id": article, "text": "x".repeat(200 * 1024)});
    let over_gateway = vec![b' '; 1024 * 1024 + 1];
    let bad_session = json!({"duration_seconds": 0, "phrases_seen": 1, "phrases_correct": 2, "language_code": "es"});
    let session = json!({"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1, "language_code": "es"});
    let first = answer(
        sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("rid"))
            .header("idempotency-key", "rid-key")
            .json(&session),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);

    type Make<'a> = Box<dyn Fn() -> RequestBuilder + 'a>;
    let cases: Vec<(u16, &str, Make)> = vec![
        // Made by the services.
        (
            422,
            "validation_failed",
            Box::new(|| {
                sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("rid"))
                    .json(&bad_session)
            }),
        ),
        (
            422,
            "idempotency_key_reused",
            Box::new(|| {
                let mut other = session.clone();
                other["duration_seconds"] = json!(61);
                sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("rid"))
                    .header("idempotency-key", "rid-key")
                    .json(&other)
            }),
        ),
        (
            422,
            "unknown_article",
            Box::new(|| {
                sys.req(Method::POST, "/v1/news/comments", Some("rid"))
                    .json(&json!({"article_id": "art-none", "text": "x"}))
            }),
        ),
        (
            404,
            "article_not_found",
            Box::new(|| sys.req(Method::GET, "/v1/news/articles/art-none", None)),
        ),
        (
            404,
            "phrase_not_found",
            Box::new(|| sys.req(Method::GET, "/v1/lingo/phrases/ph-none", None)),
        ),
        (
            404,
            "article_not_found",
            Box::new(|| sys.req(Method::POST, "/v1/news/articles/art-none/like", Some("rid"))),
        ),
        (
            400,
            "invalid_query",
            Box::new(|| sys.req(Method::GET, "/v1/news/articles?limit=101", None)),
        ),
        (
            400,
            "invalid_cursor",
            Box::new(|| sys.req(Method::GET, "/v1/lingo/phrases?cursor=zz", None)),
        ),
        (
            400,
            "malformed_json",
            Box::new(|| {
                sys.req(Method::POST, "/v1/news/comments", Some("rid"))
                    .header("content-type", "application/json")
                    .body("{")
            }),
        ),
        (
            415,
            "unsupported_media_type",
            Box::new(|| {
                sys.req(Method::POST, "/v1/news/comments", Some("rid"))
                    .header("content-type", "text/plain")
                    .body("{}")
            }),
        ),
        (
            413,
            "payload_too_large",
            Box::new(|| {
                sys.req(Method::POST, "/v1/news/comments", Some("rid"))
                    .json(&big)
            }),
        ),
        // Made by the gateway.
        (
            401,
            "missing_token",
            Box::new(|| sys.req(Method::GET, "/v1/lingo/me/xp", None)),
        ),
        (
            401,
            "invalid_token",
            Box::new(|| {
                sys.req(Method::GET, "/v1/news/articles", None)
                    .header("authorization", "Bearer x")
            }),
        ),
        (
            403,
            "insufficient_scope",
            Box::new(|| sys.req(Method::GET, "/v1/lingo/analytics/progress", Some("rid"))),
        ),
        (
            404,
            "not_found",
            Box::new(|| sys.req(Method::GET, "/v1/news/nowhere", None)),
        ),
        (
            404,
            "not_found",
            Box::new(|| sys.req(Method::GET, "/elsewhere", None)),
        ),
        (
            405,
            "method_not_allowed",
            Box::new(|| sys.req(Method::PUT, "/v1/news/articles", None)),
        ),
        (
            413,
            "payload_too_large",
            Box::new(|| {
                sys.req(Method::POST, "/v1/news/comments", Some("rid"))
                    .header("content-type", "application/json")
                    .body(over_gateway.clone())
            }),
        ),
    ];
    for (status, code, make) in &cases {
        let context = format!("{status} {code}");
        let given = answer(make().header("x-request-id", "client-id.1:A_b-2")).await;
        let id = given.assert_problem(*status, code, &context);
        assert_eq!(
            id, "client-id.1:A_b-2",
            "{context}: the client's id is kept"
        );

        let generated = answer(make()).await;
        let id = generated.assert_problem(*status, code, &context);
        assert!(!id.is_empty(), "{context}");

        for insane in ["has space", &"a".repeat(129), "é", ""] {
            let replaced = answer(make().header("x-request-id", insane)).await;
            let id = replaced.assert_problem(*status, code, &format!("{context} {insane:?}"));
            assert_ne!(id, insane, "{context}: an insane id was kept");
        }
    }
    // A success carries the id too, from the service and from the cache.
    for n in 0..2 {
        let ok = answer(
            sys.req(Method::GET, "/v1/lingo/languages", None)
                .header("x-request-id", format!("ok-{n}")),
        )
        .await;
        assert_eq!(ok.header("x-request-id"), Some(format!("ok-{n}").as_str()));
    }
}

/// Two `x-request-id` headers, the longest sane id, and a `Connection` header naming it: the
/// answer's header and the service's `request_id` still agree.
#[tokio::test]
async fn odd_request_id_headers_still_give_one_id_end_to_end() {
    let sys = Sys::start().await;
    let longest = "a".repeat(128);
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "two ids",
            vec![
                ("x-request-id", "first-id".into()),
                ("x-request-id", "second-id".into()),
            ],
        ),
        (
            "two ids, first insane",
            vec![
                ("x-request-id", "bad id".into()),
                ("x-request-id", "good-id".into()),
            ],
        ),
        ("longest", vec![("x-request-id", longest.clone())]),
        (
            "with traceparent",
            vec![
                ("x-request-id", "traced".into()),
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
                ),
            ],
        ),
        (
            "bad traceparent",
            vec![
                ("x-request-id", "traced-2".into()),
                ("traceparent", "garbage".into()),
            ],
        ),
    ];
    for (name, headers) in cases {
        for path in ["/v1/news/articles/art-none", "/v1/lingo/phrases/none"] {
            let mut request = sys.req(Method::GET, path, None);
            for (header, value) in &headers {
                request = request.header(*header, value);
            }
            let got = answer(request).await;
            let code = if path.contains("news") {
                "article_not_found"
            } else {
                "phrase_not_found"
            };
            let id = got.assert_problem(404, code, name);
            assert_eq!(
                got.headers.get_all("x-request-id").iter().count(),
                1,
                "{name}"
            );
            if name == "longest" {
                assert_eq!(id, longest);
            }
        }
    }
}

/// A token verified once is not trusted past its `exp` (plus the 60 s leeway): the gateway's
/// cache of verified tokens does not outlive it, on a required and an optional endpoint.
#[tokio::test]
async fn a_token_that_expires_between_two_requests_is_refused_on_the_second() {
    let sys = Sys::start().await;
    let now = jsonwebtoken::get_current_timestamp();
    // Within the leeway for about 3 more seconds.
    let expiring = token_with_claims(claims_with("brief", |c| c["exp"] = json!(now - 57)));
    for path in ["/v1/lingo/me/xp", "/v1/news/articles?limit=1"] {
        let ok = answer(sys.req(Method::GET, path, None).bearer_auth(&expiring)).await;
        assert_eq!(ok.status, StatusCode::OK, "{path}: {}", ok.json());
    }
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    for path in ["/v1/lingo/me/xp", "/v1/news/articles?limit=1"] {
        let refused = answer(sys.req(Method::GET, path, None).bearer_auth(&expiring)).await;
        refused.assert_problem(401, "invalid_token", path);
        let www = refused.header("www-authenticate").unwrap_or_default();
        assert!(www.contains("error=\"invalid_token\""), "{www}");
    }
}

/// `viewer` through the gateway: null without a token on every kind of item, and each flag set
/// by the caller's own like, bookmark and follows.
#[tokio::test]
async fn viewer_flags_follow_the_callers_own_actions_through_the_gateway() {
    let sys = Sys::start().await;
    let page = sys.get_ok("/v1/news/articles?limit=1", None).await;
    let item = &page["data"][0];
    let (article, journalist, organization) = (
        item["id"].as_str().unwrap().to_owned(),
        item["journalist_id"].as_str().unwrap().to_owned(),
        item["organization_id"].as_str().unwrap().to_owned(),
    );
    for target in [
        format!("/v1/news/articles/{article}/like"),
        format!("/v1/news/articles/{article}/bookmark"),
        format!("/v1/news/journalists/{journalist}/follow"),
        format!("/v1/news/organizations/{organization}/follow"),
    ] {
        let done = answer(sys.req(Method::POST, &target, Some("viewer"))).await;
        assert_eq!(done.status, StatusCode::OK, "{target}");
    }
    let mine = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("viewer"))
        .await;
    assert_eq!(
        mine["viewer"],
        json!({"liked": true, "bookmarked": true, "following_journalist": true, "following_organization": true})
    );
    let other = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("other"))
        .await;
    assert_eq!(
        other["viewer"],
        json!({"liked": false, "bookmarked": false, "following_journalist": false, "following_organization": false})
    );
    let organizations = "/v1/news/organizations?limit=100".to_owned();
    let journalists = format!("/v1/news/journalists?organization_id={organization}&limit=100");
    for (list, id) in [(&organizations, &organization), (&journalists, &journalist)] {
        let anonymous = sys.get_ok(list, None).await;
        assert!(
            anonymous["data"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["viewer"].is_null())
        );
        let signed = sys.get_ok(list, Some("viewer")).await;
        for entry in signed["data"].as_array().unwrap() {
            assert_eq!(
                entry["viewer"]["following"],
                entry["id"] == id.as_str(),
                "{entry}"
            );
        }
    }
    let following = sys.get_ok("/v1/news/me/following", Some("viewer")).await;
    assert_eq!(following["journalists"][0]["id"], journalist.as_str());
    assert_eq!(following["organizations"][0]["id"], organization.as_str());
    let bookmarks = sys.get_ok("/v1/news/me/bookmarks", Some("viewer")).await;
    assert_eq!(bookmarks["data"][0]["id"], article.as_str());
    assert_eq!(bookmarks["data"][0]["viewer"]["bookmarked"], true);
}

/// "Every response carries `x-request-id`": the gateway's own endpoints, a preflight, a 404
/// outside `/v1`, a 400 for a bad `Host`, as well as the proxied answers.
#[tokio::test]
async fn every_answer_of_the_gateway_carries_a_request_id() {
    let sys = Sys::start_with(|config| {
        config.cors_allowed_origins = "https://app.example.com".parse().unwrap();
    })
    .await;
    let mut missing = Vec::new();
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/swagger-ui.css",
        "/nowhere",
        "/v1/news/articles",
    ] {
        let got = answer(
            sys.req(Method::GET, path, None)
                .header("x-request-id", "own-id"),
        )
        .await;
        if got.header("x-request-id") != Some("own-id") {
            missing.push(format!(
                "GET {path} {}: {:?}",
                got.status,
                got.header("x-request-id")
            ));
        }
    }
    let preflight = answer(
        sys.req(Method::OPTIONS, "/v1/news/articles", None)
            .header("origin", "https://app.example.com")
            .header("access-control-request-method", "GET")
            .header("x-request-id", "own-id"),
    )
    .await;
    if preflight.header("x-request-id") != Some("own-id") {
        missing.push(format!(
            "preflight {}: {:?}",
            preflight.status,
            preflight.header("x-request-id")
        ));
    }
    let bad_host = answer(
        sys.req(Method::GET, "/v1/news/articles", None)
            .header("host", "a, b")
            .header("x-request-id", "own-id"),
    )
    .await;
    bad_host.assert_problem(400, "bad_request", "bad Host");
    if bad_host.header("x-request-id") != Some("own-id") {
        missing.push(format!(
            "bad Host {}: {:?}",
            bad_host.status,
            bad_host.header("x-request-id")
        ));
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
