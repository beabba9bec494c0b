//! The HTTP plumbing every binary shares: problems and their typed codes, the request-id
//! context and middleware, strict extractors, paging, the service layer stack, request metrics
//! and OpenAPI helpers. Nothing here touches a database.

pub mod body;
pub mod cache;
pub mod codes;
pub mod context;
pub mod cursor;
pub mod head;
pub mod json;
pub mod load;
pub mod metrics;
pub mod openapi;
pub mod outbound;
pub mod paging;
pub mod path_id;
pub mod problem;
pub mod request_id;
pub mod serve;
pub mod stack;
