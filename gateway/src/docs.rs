//! `GET /openapi.json` (both services' documents merged) and `GET /docs` (Swagger UI, served from
//! assets inside the binary so the page works offline and without a CDN).
//!
//! The merged document is the committed `openapi.json` at the top of the repository; a test
//! regenerates it from the services' code and fails when the two differ. It is also the route
//! table of a group until the group's own document has been read (learn.rs).

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

/// The merged OpenAPI document (kept in sync with the services by the `system` test).
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

const SWAGGER_UI_JS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js");
const SWAGGER_UI_CSS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui.css");

const DOCS_HTML: &str = r##"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>lingo-news API reference</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      persistAuthorization: true,
      displayOperationId: true
    });
  </script>
</body>
</html>
"##;

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/docs", get(|| async { Html(DOCS_HTML) }))
        .route(
            "/docs/swagger-ui-bundle.js",
            get(|| async { asset("text/javascript; charset=utf-8", SWAGGER_UI_JS) }),
        )
        .route(
            "/docs/swagger-ui.css",
            get(|| async { asset("text/css; charset=utf-8", SWAGGER_UI_CSS) }),
        )
}

async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI_JSON,
    )
        .into_response()
}

fn asset(content_type: &'static str, bytes: &'static [u8]) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        bytes,
    )
        .into_response()
}
