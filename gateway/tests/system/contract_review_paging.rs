//! the contract (docs/conventions.md), "Every list can be read to its end": every paged list of both services,
//! read through the gateway by `cursor` to its end and by `offset`, must give the same items in
//! the same order; the cursor keeps filters and order; `cursor` with `offset` is 400
//! `invalid_query`; another list's cursor is 400 `invalid_cursor`; `cursor=` is no cursor;
//! `next_cursor` is null at the end, and `next_offset` and `next_cursor` agree about "more".

use std::collections::HashSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::contract_review::{Answer, Sys, answer, ids, with_param};

/// One list: a path (with its filters) and the bearer token it is read with.
struct List {
    path: String,
    bearer: Option<String>,
    /// Whether the list also takes `offset` (the cursor-only lists do not).
    offset: bool,
}

impl List {
    fn new(path: &str, who: Option<&str>, offset: bool) -> Self {
        Self {
            path: path.to_owned(),
            bearer: who.map(token),
            offset,
        }
    }

    fn analytics(path: &str) -> Self {
        Self {
            path: path.to_owned(),
            bearer: Some(token_with_scope("pager-analyst", "lingo:analytics")),
            offset: false,
        }
    }

    async fn get(&self, sys: &Sys, path: &str) -> Answer {
        let mut request = sys.req(Method::GET, path, None);
        if let Some(bearer) = &self.bearer {
            request = request.bearer_auth(bearer);
        }
        answer(request).await
    }

    async fn page(&self, sys: &Sys, path: &str) -> Value {
        let answer = self.get(sys, path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.json());
        let page = answer.json();
        let data = page["data"].as_array().unwrap();
        assert_eq!(
            page["count"],
            data.len(),
            "{path}: count is the items of data"
        );
        page
    }

    /// Reads the list to its end by cursor, `limit` at a time.
    async fn walk_by_cursor(&self, sys: &Sys, limit: usize) -> Vec<String> {
        let first = with_param(&self.path, "limit", &limit.to_string());
        let mut path = first.clone();
        let mut items = Vec::new();
        for _ in 0..1000 {
            let page = self.page(sys, &path).await;
            let got = ids(&page);
            if path != first {
                assert!(!got.is_empty(), "{path}: a cursor led to an empty page");
                if self.offset {
                    assert_eq!(page["offset"], 0, "{path}: a cursor page has no position");
                    assert!(page["next_offset"].is_null(), "{path}: {page}");
                }
            }
            assert!(got.len() <= limit, "{path}");
            items.extend(got);
            match page["next_cursor"].as_str() {
                None => {
                    assert!(page["next_cursor"].is_null(), "{path}: {page}");
                    return items;
                }
                Some(cursor) => path = with_param(&first, "cursor", cursor),
            }
        }
        panic!("{}: no end after 1000 pages", self.path);
    }

    /// Reads the list to its end by offset; `next_offset` and `next_cursor` must agree about
    /// whether more follows.
    async fn walk_by_offset(&self, sys: &Sys, limit: usize) -> Vec<String> {
        let mut offset = 0;
        let mut items = Vec::new();
        loop {
            let path = with_param(
                &with_param(&self.path, "limit", &limit.to_string()),
                "offset",
                &offset.to_string(),
            );
            let page = self.page(sys, &path).await;
            let got = ids(&page);
            let count = got.len();
            items.extend(got);
            assert_eq!(
                page["next_offset"].is_null(),
                page["next_cursor"].is_null(),
                "{path}: next_offset and next_cursor disagree about more: {} / {}",
                page["next_offset"],
                page["next_cursor"]
            );
            match page["next_offset"].as_u64() {
                None => return items,
                Some(next) => {
                    assert_eq!(next as usize, offset + count, "{path}");
                    assert!(count > 0, "{path}: an empty page with a next_offset");
                    offset = next as usize;
                }
            }
        }
    }

    /// The first page's `next_cursor` with `limit`.
    async fn cursor(&self, sys: &Sys, limit: usize) -> String {
        let page = self
            .page(sys, &with_param(&self.path, "limit", &limit.to_string()))
            .await;
        page["next_cursor"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: one page only: {page}", self.path))
            .to_owned()
    }
}

/// Gives the lists below enough items for several pages: comments on two articles, bookmarks,
/// follows, study sessions with answers (so `/me/phrases` and the analytics have rows).
async fn fill(sys: &Sys) -> (String, String) {
    let articles = sys.article_ids(40).await;
    let (thread, other) = (articles[0].clone(), articles[1].clone());
    for n in 0..9 {
        let top = sys
            .post_json(
                "/v1/news/comments",
                &format!("reader-{n}"),
                &json!({"article_id": thread, "text": format!("top {n}")}),
            )
            .await;
        assert_eq!(top.status, StatusCode::CREATED, "{}", top.json());
        let reply = json!({"article_id": thread, "text": format!("reply {n}"), "parent_id": top.json()["id"]});
        let reply = sys.post_json("/v1/news/comments", "pager", &reply).await;
        assert_eq!(reply.status, StatusCode::CREATED);
    }
    for n in 0..3 {
        let comment = json!({"article_id": other, "text": format!("other {n}")});
        let posted = sys.post_json("/v1/news/comments", "pager", &comment).await;
        assert_eq!(posted.status, StatusCode::CREATED);
    }
    for article in &articles[..13] {
        let bookmarked = answer(sys.req(
            Method::POST,
            &format!("/v1/news/articles/{article}/bookmark"),
            Some("pager"),
        ))
        .await;
        assert_eq!(bookmarked.status, StatusCode::OK);
    }
    for target in [
        "journalists/jrn-0001",
        "journalists/jrn-0002",
        "organizations/org-003",
    ] {
        let followed = answer(sys.req(
            Method::POST,
            &format!("/v1/news/{target}/follow"),
            Some("pager"),
        ))
        .await;
        assert_eq!(followed.status, StatusCode::OK, "{}", followed.json());
    }
    for n in 0..11 {
        let answers = json!([
            {"phrase_id": format!("ph-es-{:03}", 2 * n + 1), "correct": true},
            {"phrase_id": format!("ph-es-{:03}", 2 * n + 2), "correct": false},
        ]);
        let session = json!({"duration_seconds": 60, "phrases_seen": 2, "phrases_correct": 1,
            "language_code": "es", "answers": answers});
        let posted = sys
            .post_json("/v1/lingo/me/study-sessions", "pager", &session)
            .await;
        assert_eq!(posted.status, StatusCode::CREATED, "{}", posted.json());
    }
    for n in 0..4 {
        for language in ["fr", "de"] {
            let posted = sys.study(&format!("pager-{n}"), language).await;
            assert_eq!(posted.status, StatusCode::CREATED);
        }
    }
    (thread, other)
}

/// Every paged list of both services, with their filters.
fn lists(thread: &str, other: &str) -> Vec<List> {
    vec![
        List::new("/v1/news/articles", None, true),
        List::new("/v1/news/articles", Some("pager"), true),
        List::new("/v1/news/articles?organization_id=org-003", None, true),
        List::new("/v1/news/articles?journalist_id=jrn-0001", None, true),
        List::new(&format!("/v1/news/articles/{thread}/comments"), None, true),
        List::new(&format!("/v1/news/articles/{other}/comments"), None, true),
        List::new("/v1/news/organizations", None, true),
        List::new("/v1/news/journalists", None, true),
        List::new("/v1/news/journalists?organization_id=org-002", None, true),
        List::new("/v1/news/me/bookmarks", Some("pager"), true),
        List::new("/v1/news/me/feed", Some("pager"), true),
        List::new(
            "/v1/news/search?q=housing%20OR%20tourism%20OR%20budget&sort=newest",
            None,
            false,
        ),
        List::new(
            "/v1/news/search?q=housing%20OR%20tourism%20OR%20budget",
            Some("pager"),
            false,
        ),
        List::new("/v1/lingo/phrases", None, true),
        List::new("/v1/lingo/phrases?language=es", None, true),
        List::new("/v1/lingo/phrases?q=buen", None, true),
        List::new("/v1/lingo/me/study-sessions", Some("pager"), true),
        List::new("/v1/lingo/me/recommendations", Some("learner-001"), true),
        List::new("/v1/lingo/me/phrases", Some("pager"), false),
        List::new("/v1/lingo/me/phrases?language=es", Some("pager"), false),
        List::analytics("/v1/lingo/analytics/progress"),
        List::analytics("/v1/lingo/analytics/phrase-progress"),
    ]
}

#[tokio::test]
async fn every_list_of_both_services_reads_to_its_end_by_cursor_through_the_gateway() {
    let sys = Sys::start().await;
    let (thread, other) = fill(&sys).await;
    for list in lists(&thread, &other) {
        // Limits that divide a list's length and limits that do not: one list whatever the
        // page size.
        let mut walks = Vec::new();
        for limit in [7, 10, 100] {
            let by_cursor = list.walk_by_cursor(&sys, limit).await;
            let unique: HashSet<&String> = by_cursor.iter().collect();
            assert_eq!(
                unique.len(),
                by_cursor.len(),
                "{} limit {limit}: an item served twice",
                list.path
            );
            assert!(by_cursor.len() >= 3, "{}: too short to page", list.path);
            if list.offset {
                let by_offset = list.walk_by_offset(&sys, limit).await;
                assert_eq!(
                    by_cursor, by_offset,
                    "{} limit {limit}: cursor and offset walks differ",
                    list.path
                );
            }
            walks.push(by_cursor);
        }
        assert!(
            walks.windows(2).all(|w| w[0] == w[1]),
            "{}: the page size changed the list",
            list.path
        );
    }
}

/// A list read in pages of exactly its length, or of a divisor of it, ends with its last full
/// page: no `next_cursor` or `next_offset` to an empty page.
#[tokio::test]
async fn a_list_that_ends_on_a_full_page_says_so_on_that_page() {
    let sys = Sys::start().await;
    // 20 organisations, 48 Spanish phrases, 5 journalists per organisation, 6 languages.
    for (path, length) in [
        ("/v1/news/organizations", 20),
        ("/v1/lingo/phrases?language=es", 48),
        ("/v1/news/journalists?organization_id=org-001", 5),
    ] {
        for limit in [length, length / 2] {
            let list = List::new(path, None, true);
            let by_cursor = list.walk_by_cursor(&sys, limit).await;
            assert_eq!(by_cursor.len(), length, "{path}");
            let page = list
                .page(&sys, &with_param(path, "limit", &length.to_string()))
                .await;
            assert!(
                page["next_offset"].is_null() && page["next_cursor"].is_null(),
                "{path}: the whole list in one page says more follows: {} / {}",
                page["next_offset"],
                page["next_cursor"]
            );
        }
    }
}

#[tokio::test]
async fn cursors_are_refused_with_an_offset_by_another_list_and_when_garbled() {
    let sys = Sys::start().await;
    let (thread, other) = fill(&sys).await;
    let lists = lists(&thread, &other);
    let mut cursors = Vec::new();
    for list in &lists {
        cursors.push(list.cursor(&sys, 2).await);
    }
    for (list, cursor) in lists.iter().zip(&cursors) {
        // `cursor=` is no cursor: the first page.
        let first = list.page(&sys, &with_param(&list.path, "limit", "2")).await;
        let empty = list
            .page(
                &sys,
                &with_param(&with_param(&list.path, "limit", "2"), "cursor", ""),
            )
            .await;
        assert_eq!(
            ids(&first),
            ids(&empty),
            "{}: cursor= is no cursor",
            list.path
        );

        if list.offset {
            let both = with_param(&with_param(&list.path, "cursor", cursor), "offset", "0");
            list.get(&sys, &both)
                .await
                .assert_problem(400, "invalid_query", &both);
        } else {
            let with_offset = with_param(&list.path, "offset", "2");
            let answer = list.get(&sys, &with_offset).await;
            // Search says so (section 4.1); other cursor-only lists may ignore an unknown
            // parameter (conventions: unknown query parameters are ignored).
            if list.path.starts_with("/v1/news/search") {
                answer.assert_problem(400, "invalid_query", &with_offset);
            }
        }

        for garbled in ["zzz", "eyJ4IjoxfQ", "%00", &cursor[..cursor.len() / 2]] {
            let path = with_param(&list.path, "cursor", garbled);
            list.get(&sys, &path)
                .await
                .assert_problem(400, "invalid_cursor", &path);
        }
    }

    // Another list's cursor: every pair of lists that are not one list with other filters
    // that the cursor may continue.
    let mut refused = Vec::new();
    for (i, list) in lists.iter().enumerate() {
        for (j, cursor) in cursors.iter().enumerate() {
            if same_list(&lists[i].path, &lists[j].path) {
                continue;
            }
            let path = with_param(&list.path, "cursor", cursor);
            let answer = list.get(&sys, &path).await;
            if answer.status != StatusCode::BAD_REQUEST || answer.json()["code"] != "invalid_cursor"
            {
                refused.push(format!(
                    "{} given the cursor of {}: {} {}",
                    list.path,
                    lists[j].path,
                    answer.status,
                    answer.json()
                ));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "cursors of another list accepted:\n{}",
        refused.join("\n")
    );
}

/// Whether the list `receiver` may take a cursor of the list `giver`: the same endpoint, and
/// every filter the receiver sets is the giver's own (a filter left out is taken from the
/// cursor). One endpoint with another filter value, or a filter the cursor was made without,
/// is another list.
fn same_list(receiver: &str, giver: &str) -> bool {
    let split = |path: &str| -> (String, Vec<String>) {
        let (endpoint, query) = path.split_once('?').unwrap_or((path, ""));
        let params = query.split('&').filter(|p| !p.is_empty());
        (endpoint.to_owned(), params.map(str::to_owned).collect())
    };
    let (receiver_endpoint, receiver_params) = split(receiver);
    let (giver_endpoint, giver_params) = split(giver);
    receiver_endpoint == giver_endpoint && receiver_params.iter().all(|p| giver_params.contains(p))
}

/// The cursor keeps the list's filters: given without them it continues the filtered list, and
/// given with other filters it is refused.
#[tokio::test]
async fn a_cursor_keeps_its_filters_and_order() {
    let sys = Sys::start().await;
    let cases = [
        (
            "/v1/news/articles?organization_id=org-004",
            "/v1/news/articles",
            "organization_id=org-005",
        ),
        (
            "/v1/news/journalists?organization_id=org-002",
            "/v1/news/journalists",
            "organization_id=org-003",
        ),
        (
            "/v1/lingo/phrases?language=fr",
            "/v1/lingo/phrases",
            "language=de",
        ),
        ("/v1/lingo/phrases?q=gracias", "/v1/lingo/phrases", "q=hola"),
        (
            "/v1/news/search?q=housing%20OR%20tourism&sort=newest",
            "/v1/news/search?q=housing%20OR%20tourism",
            "sort=relevance",
        ),
    ];
    for (filtered, bare, other_filter) in cases {
        let offset = !filtered.contains("/search");
        let list = List::new(filtered, None, offset);
        let whole = list.walk_by_cursor(&sys, 100).await;
        assert!(whole.len() > 2, "{filtered}: {whole:?}");
        let first = list.page(&sys, &with_param(filtered, "limit", "2")).await;
        let cursor = first["next_cursor"].as_str().unwrap().to_owned();
        // Without the filters, the cursor continues the filtered list.
        let unfiltered = List::new(bare, None, offset);
        let page = unfiltered
            .page(
                &sys,
                &with_param(&with_param(bare, "limit", "100"), "cursor", &cursor),
            )
            .await;
        assert_eq!(
            ids(&page),
            whole[2..],
            "{filtered}: continued without the filter"
        );
        // With other filters, it is refused.
        let (key, value) = other_filter.split_once('=').unwrap();
        let path = with_param(&with_param(bare, key, value), "cursor", &cursor);
        unfiltered
            .get(&sys, &path)
            .await
            .assert_problem(400, "invalid_cursor", &path);
    }
}

/// `limit` and `offset` out of range or not plain digits are 400 `invalid_query` on every
/// paged list through the gateway, never clamped; the edges of the ranges are taken.
#[tokio::test]
async fn limit_and_offset_out_of_range_are_refused_on_every_list() {
    let sys = Sys::start().await;
    let (thread, other) = fill(&sys).await;
    let bad_limits = [
        "0",
        "101",
        "-1",
        "abc",
        "1.0",
        "+5",
        "5e0",
        "",
        "99999999999999999999",
    ];
    let bad_offsets = ["10001", "-1", "x", "1.5", "-0"];
    for list in lists(&thread, &other) {
        for limit in bad_limits {
            let path = with_param(&list.path, "limit", limit);
            list.get(&sys, &path)
                .await
                .assert_problem(400, "invalid_query", &path);
        }
        for limit in ["1", "100"] {
            list.page(&sys, &with_param(&list.path, "limit", limit))
                .await;
        }
        if !list.offset {
            continue;
        }
        for offset in bad_offsets {
            let path = with_param(&list.path, "offset", offset);
            list.get(&sys, &path)
                .await
                .assert_problem(400, "invalid_query", &path);
        }
        let last = list
            .page(&sys, &with_param(&list.path, "offset", "10000"))
            .await;
        assert_eq!(last["count"], 0, "{}", list.path);
        assert!(last["next_offset"].is_null() && last["next_cursor"].is_null());
    }
}

/// "A cursor is stable under inserts: every item present when the walk starts is served exactly
/// once, in the list's order; an item added during the walk is served at most once": a thread
/// and a learner's sessions walked by cursor while comments, replies and sessions are added.
#[tokio::test]
async fn a_cursor_walk_is_stable_while_items_are_added() {
    let sys = Sys::start().await;
    let (thread, _) = fill(&sys).await;
    let lists = [
        List::new(&format!("/v1/news/articles/{thread}/comments"), None, true),
        List::new("/v1/lingo/me/study-sessions", Some("pager"), true),
        List::new("/v1/news/me/bookmarks", Some("pager"), true),
    ];
    for list in lists {
        let before = list.walk_by_cursor(&sys, 100).await;
        let first = with_param(&list.path, "limit", "3");
        let mut path = first.clone();
        let mut seen = Vec::new();
        let mut round = 0;
        loop {
            let page = list.page(&sys, &path).await;
            seen.extend(ids(&page));
            add_items(&sys, &list.path, &thread, &seen, round).await;
            round += 1;
            match page["next_cursor"].as_str() {
                Some(cursor) => path = with_param(&first, "cursor", cursor),
                None => break,
            }
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "{}: served twice", list.path);
        let originals: Vec<&String> = seen.iter().filter(|id| before.contains(id)).collect();
        assert_eq!(
            originals,
            before.iter().collect::<Vec<_>>(),
            "{}: the items present at the start, once each and in order",
            list.path
        );
    }
}

/// Adds an item to the list being walked: a top-level comment and a reply to the last comment
/// read, a study session, or a bookmark of an article not bookmarked yet.
async fn add_items(sys: &Sys, list: &str, thread: &str, seen: &[String], round: usize) {
    if list.contains("/comments") {
        let top = json!({"article_id": thread, "text": format!("late {round}")});
        assert_eq!(
            sys.post_json("/v1/news/comments", "late", &top)
                .await
                .status,
            StatusCode::CREATED
        );
        let reply = json!({"article_id": thread, "text": "late reply", "parent_id": seen.last()});
        assert_eq!(
            sys.post_json("/v1/news/comments", "late", &reply)
                .await
                .status,
            StatusCode::CREATED
        );
    } else if list.contains("study-sessions") {
        assert_eq!(sys.study("pager", "it").await.status, StatusCode::CREATED);
    } else {
        let article = format!("art-{:06}", 100 + round);
        let done = answer(sys.req(
            Method::POST,
            &format!("/v1/news/articles/{article}/bookmark"),
            Some("pager"),
        ))
        .await;
        assert_eq!(done.status, StatusCode::OK, "{article}");
    }
}
