//! An outside review of the contract (docs/authentication.md) at the gateway: the `WWW-Authenticate` values written
//! out literally (not taken from the implementation), and the claim rules at their edges: `iss`
//! as an array, `aud` as a string or an array, `nbf`/`iat`/`exp` within and beyond the 60 s
//! leeway, `sub` of 255 and 256 characters and with control characters, and scopes several,
//! repeated and in another case.

use serde_json::{Value, json};
use shared_auth::testing::{default_claims, token_with_claims};

use crate::helpers::{Stack, problem};

const REQUIRED: &str = "/v1/news/me/feed";
const OPTIONAL: &str = "/v1/news/articles";
const SCOPED: &str = "/v1/lingo/analytics/progress";
const REALM: &str = "Bearer realm=\"lingo-news\"";

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("time")
}

fn claims(change: impl FnOnce(&mut Value)) -> String {
    let mut claims = default_claims("ada");
    change(&mut claims);
    token_with_claims(claims)
}

async fn get(stack: &Stack, path: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = stack.gateway.client.get(stack.gateway.url(path));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.expect("answered")
}

fn www_authenticate(response: &reqwest::Response) -> String {
    response.headers()["www-authenticate"]
        .to_str()
        .expect("ascii")
        .to_owned()
}

/// Every row of the outcomes table with its `WWW-Authenticate` exactly as the contract (docs/authentication.md) writes it.
#[tokio::test]
async fn www_authenticate_is_exactly_the_tables() {
    let stack = Stack::start().await;

    let missing = get(&stack, REQUIRED, None).await;
    assert_eq!(missing.status(), 401);
    assert_eq!(www_authenticate(&missing), REALM);
    assert_eq!(problem(missing).await["code"], "missing_token");

    for header in [
        "",
        "Basic YWRhOnNlY3JldA==",
        "Bearer",
        "Bearer a b",
        "Token abc",
    ] {
        for path in [REQUIRED, OPTIONAL] {
            let response = get(&stack, path, Some(header)).await;
            assert_eq!(response.status(), 401, "{header:?} on {path}");
            assert_eq!(
                www_authenticate(&response),
                format!("{REALM}, error=\"invalid_request\""),
                "{header:?} on {path}"
            );
            assert_eq!(
                problem(response).await["code"],
                "invalid_authorization_header"
            );
        }
    }

    let expired = format!("Bearer {}", claims(|c| c["exp"] = json!(now() - 3600)));
    for path in [REQUIRED, OPTIONAL, SCOPED] {
        let response = get(&stack, path, Some(&expired)).await;
        assert_eq!(response.status(), 401, "{path}");
        let value = www_authenticate(&response);
        let prefix = format!("{REALM}, error=\"invalid_token\", error_description=\"");
        assert!(
            value.starts_with(&prefix) && value.ends_with('"') && value.len() > prefix.len() + 1,
            "{value}"
        );
        assert_eq!(problem(response).await["code"], "invalid_token");
    }

    let unscoped = format!("Bearer {}", claims(|_| {}));
    let response = get(&stack, SCOPED, Some(&unscoped)).await;
    assert_eq!(response.status(), 403);
    assert_eq!(
        www_authenticate(&response),
        format!("{REALM}, error=\"insufficient_scope\", scope=\"lingo:analytics\"")
    );
    assert_eq!(problem(response).await["code"], "insufficient_scope");
    assert_eq!(stack.hits(), 0, "no refusal reached a service");
}

/// The claim rules at their edges, each on a Required endpoint (and, for the refused ones, on an
/// Optional one: fail closed). Refused tokens never reach a service.
#[tokio::test]
async fn claims_at_their_edges() {
    let stack = Stack::start().await;
    let sub_255 = "s".repeat(255);
    let sub_256 = "s".repeat(256);
    let sub_255_chars = "\u{e9}".repeat(255);
    let cases: Vec<(&str, String, bool)> = vec![
        ("the default token", claims(|_| {}), true),
        (
            "iss as an array holding the issuer",
            claims(|c| c["iss"] = json!(["lingo-news-dev"])),
            false,
        ),
        (
            "no iss",
            claims(|c| {
                c.as_object_mut().expect("object").remove("iss");
            }),
            false,
        ),
        (
            "aud as an array holding the audience",
            claims(|c| c["aud"] = json!(["other-api", "lingo-news"])),
            true,
        ),
        (
            "aud as an array without the audience",
            claims(|c| c["aud"] = json!(["other-api"])),
            false,
        ),
        (
            "no aud",
            claims(|c| {
                c.as_object_mut().expect("object").remove("aud");
            }),
            false,
        ),
        (
            "nbf 30 s ahead (within the leeway)",
            claims(|c| c["nbf"] = json!(now() + 30)),
            true,
        ),
        (
            "nbf 300 s ahead",
            claims(|c| c["nbf"] = json!(now() + 300)),
            false,
        ),
        (
            "iat 30 s ahead (within the leeway)",
            claims(|c| c["iat"] = json!(now() + 30)),
            true,
        ),
        (
            "iat an hour ahead",
            claims(|c| c["iat"] = json!(now() + 3600)),
            false,
        ),
        (
            "exp 30 s ago (within the leeway)",
            claims(|c| c["exp"] = json!(now() - 30)),
            true,
        ),
        (
            "exp 300 s ago",
            claims(|c| c["exp"] = json!(now() - 300)),
            false,
        ),
        (
            "exp as a string",
            claims(|c| c["exp"] = json!((now() + 3600).to_string())),
            false,
        ),
        (
            "no exp",
            claims(|c| {
                c.as_object_mut().expect("object").remove("exp");
            }),
            false,
        ),
        (
            "sub of 255 characters",
            claims(|c| c["sub"] = json!(sub_255)),
            true,
        ),
        (
            "sub of 255 characters, 510 bytes",
            claims(|c| c["sub"] = json!(sub_255_chars)),
            true,
        ),
        (
            "sub of 256 characters",
            claims(|c| c["sub"] = json!(sub_256)),
            false,
        ),
        ("empty sub", claims(|c| c["sub"] = json!("")), false),
        (
            "sub with a NUL",
            claims(|c| c["sub"] = json!("ada\u{0}")),
            false,
        ),
        (
            "sub with a newline",
            claims(|c| c["sub"] = json!("ada\nx")),
            false,
        ),
        (
            "sub with DEL",
            claims(|c| c["sub"] = json!("ada\u{7f}")),
            false,
        ),
        (
            "sub with a C1 control (NEL)",
            claims(|c| c["sub"] = json!("ada\u{85}")),
            false,
        ),
        ("sub as a number", claims(|c| c["sub"] = json!(42)), false),
    ];
    for (case, token, accepted) in &cases {
        let header = format!("Bearer {token}");
        let response = get(&stack, REQUIRED, Some(&header)).await;
        if *accepted {
            assert_eq!(response.status(), 200, "{case}");
            continue;
        }
        assert_eq!(response.status(), 401, "{case}");
        assert!(
            www_authenticate(&response).contains("error=\"invalid_token\""),
            "{case}"
        );
        assert_eq!(problem(response).await["code"], "invalid_token", "{case}");
        let optional = get(&stack, OPTIONAL, Some(&header)).await;
        assert_eq!(optional.status(), 401, "{case} on an Optional endpoint");
    }
    let accepted = cases.iter().filter(|(_, _, ok)| *ok).count();
    assert_eq!(
        stack.hits(),
        accepted,
        "only the accepted tokens were forwarded"
    );
}

/// `scope` is space-separated: several scopes, one repeated, and the needed one among others
/// pass; scopes compare exactly (another case is another scope); a scheme name in any case is
/// the bearer scheme (RFC 9110 11.1).
#[tokio::test]
async fn scopes_are_space_separated_and_compared_exactly() {
    let stack = Stack::start().await;
    for (scope, status) in [
        ("lingo:analytics", 200),
        ("openid lingo:analytics profile", 200),
        ("lingo:analytics lingo:analytics", 200),
        ("  lingo:analytics  ", 200),
        ("LINGO:ANALYTICS", 403),
        ("lingo:analytics-extra", 403),
        ("lingo:", 403),
        ("", 403),
    ] {
        let bearer = format!("Bearer {}", claims(|c| c["scope"] = json!(scope)));
        let response = get(&stack, SCOPED, Some(&bearer)).await;
        assert_eq!(response.status(), status, "scope {scope:?}");
    }
    let token = claims(|c| c["scope"] = json!("lingo:analytics"));
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let response = get(&stack, SCOPED, Some(&format!("{scheme} {token}"))).await;
        assert_eq!(response.status(), 200, "scheme {scheme}");
    }
}

/// the contract (docs/authentication.md): "A token whose header has `crit` is rejected (RFC 7515: no extension is
/// understood)", at the gateway too, on Required and Optional endpoints.
#[tokio::test]
async fn a_token_with_crit_is_refused() {
    let stack = Stack::start().await;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.crit = Some(vec!["exp".into()]);
    let key = jsonwebtoken::EncodingKey::from_secret(shared_auth::testing::TEST_SECRET.as_bytes());
    let token = jsonwebtoken::encode(&header, &default_claims("ada"), &key).expect("sign");
    let bearer = format!("Bearer {token}");
    for path in [REQUIRED, OPTIONAL] {
        let response = get(&stack, path, Some(&bearer)).await;
        assert_eq!(response.status(), 401, "{path}");
        assert_eq!(problem(response).await["code"], "invalid_token");
    }
    assert_eq!(stack.hits(), 0);
}
