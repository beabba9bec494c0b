//! Cursor paging of the comments of an article, the caller's bookmarks, organisations and
//! journalists (issue 35): a walk by cursor visits every item once in the documented order, also
//! while items are added; a 50,000-comment thread is read to its last reply; bad cursors are 400;
//! a page after a cursor is an index range scan.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_problem, ids, pool_as, spawn_seeded, spawn_with_fixture};

/// `base` (which may hold a query already) continued by `cursor`.
fn with_cursor(base: &str, cursor: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}cursor={cursor}")
}

/// One page, asserting the shape every cursor-paged list answers with.
async fn page(app: &TestApp, path: &str, user: Option<&str>) -> Value {
    let page = app.get_json(path, user).await;
    let mut keys: Vec<&str> = page
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "count",
            "data",
            "limit",
            "next_cursor",
            "next_offset",
            "offset"
        ],
        "{path}"
    );
    // (An empty `cursor=` is no cursor: an offset page.)
    if path.contains("cursor=") && !path.ends_with("cursor=") {
        assert_eq!(
            page["next_offset"],
            Value::Null,
            "a cursor page has no offset"
        );
    }
    page
}

fn next_cursor(page: &Value) -> Option<String> {
    page["next_cursor"].as_str().map(str::to_owned)
}

/// Asserts that `seen` holds no id twice.
fn assert_no_repeats(seen: &[String]) {
    let mut unique = HashSet::new();
    for id in seen {
        assert!(unique.insert(id), "{id} served twice");
    }
}

/// Asserts that `seen` lists `expected`'s items in `expected`'s order (other items may be
/// interleaved: the ones added during a walk).
fn assert_in_order(seen: &[String], expected: &[String]) {
    let position: BTreeMap<&String, usize> =
        expected.iter().enumerate().map(|(i, id)| (id, i)).collect();
    let known: Vec<usize> = seen
        .iter()
        .filter_map(|id| position.get(id).copied())
        .collect();
    assert!(known.windows(2).all(|w| w[0] < w[1]), "out of order");
}

// --- comments -----------------------------------------------------------------------------------

/// A comment as the thread order needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Node {
    id: uuid::Uuid,
    parent_id: Option<uuid::Uuid>,
    created_at: DateTime<Utc>,
}

/// The documented thread order, computed from the tree itself (not from `path`): each top-level
/// comment oldest first, followed depth-first by its replies, oldest first (ties by id).
fn thread_order(nodes: &[Node]) -> Vec<String> {
    let mut children: BTreeMap<Option<uuid::Uuid>, Vec<&Node>> = BTreeMap::new();
    for node in nodes {
        children.entry(node.parent_id).or_default().push(node);
    }
    for siblings in children.values_mut() {
        siblings.sort_by_key(|n| (n.created_at, n.id));
    }
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack: Vec<&Node> = children
        .get(&None)
        .into_iter()
        .flatten()
        .rev()
        .copied()
        .collect();
    while let Some(node) = stack.pop() {
        order.push(node.id.to_string());
        let replies = children.get(&Some(node.id)).into_iter().flatten().rev();
        stack.extend(replies.copied());
    }
    order
}

async fn nodes(app: &TestApp, article: &str) -> Vec<Node> {
    let admin = app.admin().await;
    let nodes =
        sqlx::query_as("SELECT id, parent_id, created_at FROM comments WHERE article_id = $1")
            .bind(article)
            .fetch_all(&admin)
            .await
            .unwrap();
    admin.close().await;
    nodes
}

async fn comment(app: &TestApp, article: &str, parent: Option<&str>, text: &str) -> String {
    let body = json!({"article_id": article, "text": text, "parent_id": parent});
    let response = app.post_comment("writer", &body, None).await;
    assert_eq!(response.status(), 201, "{body}");
    let created: Value = response.json().await.unwrap();
    created["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn comments_walk_in_thread_order_once_each_while_comments_are_written() {
    let app = spawn_with_fixture().await;
    // 60 comments through the API: roots, and replies to earlier comments at any depth.
    let mut written: Vec<(String, u32)> = Vec::new();
    for n in 0..60u32 {
        let parent = (n % 3 != 0)
            .then(|| written.get((n as usize * 7) % written.len().max(1)))
            .flatten()
            .filter(|(_, depth)| *depth < 10)
            .cloned();
        let id = comment(&app, "art-1", parent.as_ref().map(|p| p.0.as_str()), "c").await;
        written.push((id, parent.map_or(0, |p| p.1 + 1)));
    }
    comment(&app, "art-2", None, "another article").await;
    let before = thread_order(&nodes(&app, "art-1").await);
    assert_eq!(before.len(), 60);

    // Walk 5 at a time; after each page write a reply to a comment already served, a reply to
    // one not served yet and a new top-level comment. Each new comment is remembered with the
    // walker's position when it was written (the last comment served).
    let base = "/articles/art-1/comments?limit=5";
    let mut seen: Vec<String> = Vec::new();
    let mut written_during: Vec<(String, String)> = Vec::new();
    let mut current = page(&app, base, None).await;
    loop {
        seen.extend(ids(&current));
        let Some(cursor) = next_cursor(&current) else {
            break;
        };
        let position = seen.last().unwrap().clone();
        let served = seen[seen.len() / 2].clone();
        let mut parents = vec![Some(served), None];
        if let Some(unseen) = before.iter().find(|id| !seen.contains(id)) {
            parents.push(Some(unseen.clone()));
        }
        for parent in parents {
            let id = comment(&app, "art-1", parent.as_deref(), "during the walk").await;
            written_during.push((id, position.clone()));
        }
        current = page(&app, &with_cursor(base, &cursor), None).await;
    }
    assert_no_repeats(&seen);
    for id in &before {
        assert!(seen.contains(id), "{id} missing from the walk");
    }
    // Everything served is in the documented order of the thread as it is now, and a comment
    // written during the walk is served exactly when it lands after the walker's position.
    let after = thread_order(&nodes(&app, "art-1").await);
    assert_in_order(&seen, &after);
    let index = |id: &String| after.iter().position(|x| x == id).unwrap();
    let (mut served_new, mut behind) = (0, 0);
    for (id, position) in &written_during {
        let lands_ahead = index(id) > index(position);
        assert_eq!(
            seen.contains(id),
            lands_ahead,
            "{id} written after {position}"
        );
        if lands_ahead {
            served_new += 1;
        } else {
            behind += 1;
        }
    }
    assert!(
        served_new > 10 && behind > 0,
        "{served_new} ahead, {behind} behind"
    );
    assert_eq!(seen.len(), 60 + served_new);

    // Offset pages still work, and their cursor continues right after them.
    let by_offset = page(&app, "/articles/art-1/comments?limit=4&offset=8", None).await;
    assert_eq!(ids(&by_offset), after[8..12]);
    assert_eq!(by_offset["next_offset"], 12);
    let cursor = next_cursor(&by_offset).unwrap();
    let next = page(
        &app,
        &with_cursor("/articles/art-1/comments?limit=4", &cursor),
        None,
    )
    .await;
    assert_eq!(ids(&next), after[12..16]);
    assert_eq!(
        (next["offset"].clone(), next["limit"].clone()),
        (json!(0), json!(4))
    );
    // An empty cursor is no cursor.
    assert_eq!(
        ids(&page(&app, "/articles/art-1/comments?limit=4&cursor=", None).await),
        after[..4]
    );
}

/// 32 hex digits of a UUIDv7-like id for `ms` (Unix milliseconds), unique per `(salt, ms)`.
const V7_HEX: &str = "lpad(to_hex(ms), 12, '0') || '7' || substr(md5(ms::text || salt), 1, 3) \
    || '8' || substr(md5(ms::text || salt), 4, 15)";

/// Inserts, as the owner and in bulk, `roots` top-level comments of `article` and then
/// `per_level` replies at each depth 1..=10, each hanging under a comment of the level above, with
/// time-ordered ids and `created_at` from them (as the service writes them).
async fn bulk_thread(app: &TestApp, article: &str, roots: i64, per_level: i64) {
    let owner = pool_as(&app.db, "news_owner").await;
    let base_ms: i64 = 1_780_000_000_000;
    sqlx::query(&format!(
        "INSERT INTO comments (id, article_id, author_id, text, depth, path, created_at) \
         SELECT g.hex::uuid, $1, 'bulk', 'root', 0, g.hex, to_timestamp(g.ms / 1000.0) \
         FROM (SELECT {V7_HEX} AS hex, ms FROM (SELECT $2::bigint + i AS ms, $1 AS salt \
               FROM generate_series(0, $3 - 1) i) s) g"
    ))
    .bind(article)
    .bind(base_ms)
    .bind(roots)
    .execute(&owner)
    .await
    .unwrap();
    for depth in 1..=10i16 {
        sqlx::query(&format!(
            "WITH p AS (SELECT id, path, row_number() OVER (ORDER BY path) - 1 AS n \
                        FROM comments WHERE article_id = $1 AND depth = $2 - 1), \
                  g AS (SELECT i, {V7_HEX} AS hex, ms, (i * 7919) % (SELECT count(*) FROM p) AS n \
                        FROM (SELECT i, $3::bigint + i AS ms, $1 || $2 AS salt \
                              FROM generate_series(0, $4 - 1) i) s) \
             INSERT INTO comments (id, article_id, parent_id, author_id, text, depth, path, created_at) \
             SELECT g.hex::uuid, $1, p.id, 'bulk', 'reply', $2, p.path || '.' || g.hex, \
                    to_timestamp(g.ms / 1000.0) \
             FROM g JOIN p ON p.n = g.n"
        ))
        .bind(article)
        .bind(depth)
        .bind(base_ms + i64::from(depth) * 10_000_000)
        .bind(per_level)
        .execute(&owner)
        .await
        .unwrap();
    }
    owner.close().await;
}

#[tokio::test]
async fn a_thread_of_50000_comments_is_read_to_its_last_reply() {
    let app = spawn_with_fixture().await;
    // 49,989 comments in bulk SQL (9,989 top-level, 4,000 at each depth 1..=10), then 11
    // through the API: a top-level comment and a chain of replies under it down to depth 10,
    // which is the thread's last comment.
    bulk_thread(&app, "art-1", 9_989, 4_000).await;
    let mut parent: Option<String> = None;
    for _ in 0..=10 {
        parent = Some(comment(&app, "art-1", parent.as_deref(), "deep").await);
    }
    let last_reply = parent.unwrap();
    let expected = thread_order(&nodes(&app, "art-1").await);
    assert_eq!(expected.len(), 50_000);
    assert_eq!(expected.last(), Some(&last_reply));
    assert_eq!(
        app.get_json("/articles/art-1", None).await["comment_count"],
        50_000
    );

    // Offsets stop at 10,000; the cursor does not.
    assert_problem(
        app.get("/articles/art-1/comments?offset=10001", None).await,
        400,
        "invalid_query",
    )
    .await;
    let base = "/articles/art-1/comments?limit=100";
    let mut seen = Vec::with_capacity(50_000);
    let mut current = page(&app, base, None).await;
    let mut pages = 1;
    loop {
        seen.extend(ids(&current));
        let Some(cursor) = next_cursor(&current) else {
            break;
        };
        current = page(&app, &with_cursor(base, &cursor), None).await;
        pages += 1;
    }
    let last_page = current;
    assert_eq!(pages, 500);
    assert_eq!(seen, expected);
    let final_comment = last_page["data"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(final_comment["id"], last_reply.as_str());
    assert_eq!(final_comment["depth"], 10);
    assert_eq!(last_page["count"], 100);
}

#[tokio::test]
async fn bad_comment_cursors_are_refused() {
    let app = spawn_with_fixture().await;
    for _ in 0..3 {
        comment(&app, "art-1", None, "a").await;
        comment(&app, "art-2", None, "b").await;
    }
    app.post("/articles/art-1/bookmark", "u1").await;
    app.post("/articles/art-2/bookmark", "u1").await;
    let thread = next_cursor(&page(&app, "/articles/art-1/comments?limit=1", None).await).unwrap();
    let articles = next_cursor(&app.get_json("/articles?limit=1", None).await).unwrap();
    let bookmarks = next_cursor(&page(&app, "/me/bookmarks?limit=1", Some("u1")).await).unwrap();
    let organizations = next_cursor(&page(&app, "/organizations?limit=1", None).await).unwrap();
    let truncated = &thread[..thread.len() - 3];
    // Other lists' cursors, another article's thread cursor, forged and truncated cursors.
    for (path, code) in [
        (
            format!("/articles/art-2/comments?cursor={thread}"),
            "invalid_cursor",
        ),
        (
            format!("/articles/art-1/comments?cursor={articles}"),
            "invalid_cursor",
        ),
        (
            format!("/articles/art-1/comments?cursor={bookmarks}"),
            "invalid_cursor",
        ),
        (
            format!("/articles/art-1/comments?cursor={organizations}"),
            "invalid_cursor",
        ),
        (
            format!("/articles/art-1/comments?cursor={truncated}"),
            "invalid_cursor",
        ),
        (
            "/articles/art-1/comments?cursor=e30".into(),
            "invalid_cursor",
        ),
        (
            "/articles/art-1/comments?cursor=%21%21%21".into(),
            "invalid_cursor",
        ),
        // {"k":"c","a":"art-1","p":"zz"}: well-formed, but no path we write.
        (
            "/articles/art-1/comments?cursor=eyJrIjoiYyIsImEiOiJhcnQtMSIsInAiOiJ6eiJ9".into(),
            "invalid_cursor",
        ),
        (
            format!("/articles/art-1/comments?offset=0&cursor={thread}"),
            "invalid_query",
        ),
    ] {
        let body = assert_problem(app.get(&path, None).await, 400, code).await;
        assert!(body["detail"].is_string(), "{path}: {body}");
    }
    // A thread cursor of an unknown article is still the other article's cursor.
    assert_problem(
        app.get(&format!("/articles/nope/comments?cursor={thread}"), None)
            .await,
        400,
        "invalid_cursor",
    )
    .await;
}

// --- bookmarks ----------------------------------------------------------------------------------

#[tokio::test]
async fn bookmarks_walk_most_recent_first_once_each_while_bookmarks_are_added() {
    let app = spawn_seeded(150).await;
    // 100 bookmarks in bulk, four to a time (ties broken by article id, descending), and some of
    // another reader's that must not show.
    let admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO bookmarks (article_id, user_id, created_at) \
           SELECT 'art-' || lpad(n::text, 6, '0'), 'walker', \
                  '2026-05-01T00:00:00Z'::timestamptz + (n / 4) * interval '1 minute' \
           FROM generate_series(1, 100) n; \
         INSERT INTO bookmarks (article_id, user_id) \
           SELECT 'art-' || lpad(n::text, 6, '0'), 'other' FROM generate_series(1, 150) n;",
    )
    .execute(&admin)
    .await
    .unwrap();
    let rows: Vec<(String, DateTime<Utc>)> =
        sqlx::query_as("SELECT article_id, created_at FROM bookmarks WHERE user_id = 'walker'")
            .fetch_all(&admin)
            .await
            .unwrap();
    let mut rows = rows;
    rows.sort_by(|a, b| (b.1, &b.0).cmp(&(a.1, &a.0)));
    let expected: Vec<String> = rows.into_iter().map(|(id, _)| id).collect();

    // Walk 7 at a time; after each page the walker bookmarks one more article through the API.
    let base = "/me/bookmarks?limit=7";
    let mut seen: Vec<String> = Vec::new();
    let mut added = 101;
    let mut current = page(&app, base, Some("walker")).await;
    loop {
        seen.extend(ids(&current));
        let Some(cursor) = next_cursor(&current) else {
            break;
        };
        let response = app
            .post(&format!("/articles/art-{added:06}/bookmark"), "walker")
            .await;
        assert_eq!(response.status(), 200);
        added += 1;
        current = page(&app, &with_cursor(base, &cursor), Some("walker")).await;
    }
    assert_no_repeats(&seen);
    // New bookmarks are newer than the walker's position: none shows up in the walk.
    assert_eq!(seen, expected);
    assert!(added > 110);

    // The walk again from the start now includes them, newest first, then the rest.
    let first = page(&app, "/me/bookmarks?limit=3", Some("walker")).await;
    assert_eq!(
        ids(&first),
        [added - 1, added - 2, added - 3].map(|n| format!("art-{n:06}"))
    );
    assert_eq!(first["next_offset"], 3);
    assert_eq!(first["data"][0]["viewer"]["bookmarked"], true);

    // Bad cursors.
    let cursor = next_cursor(&first).unwrap();
    let feed_cursor = {
        app.post("/organizations/org-001/follow", "walker").await;
        next_cursor(&page(&app, "/me/feed?limit=1", Some("walker")).await).unwrap()
    };
    for (path, code) in [
        (
            format!("/me/bookmarks?offset=3&cursor={cursor}"),
            "invalid_query",
        ),
        (
            format!("/me/bookmarks?cursor={}", &cursor[..cursor.len() - 2]),
            "invalid_cursor",
        ),
        (
            format!("/me/bookmarks?cursor={feed_cursor}"),
            "invalid_cursor",
        ),
        (format!("/me/feed?cursor={cursor}"), "invalid_cursor"),
        (format!("/articles?cursor={cursor}"), "invalid_cursor"),
        ("/me/bookmarks?cursor=e30".into(), "invalid_cursor"),
    ] {
        assert_problem(app.get(&path, Some("walker")).await, 400, code).await;
    }
}

// --- organisations and journalists --------------------------------------------------------------

/// Walks `base` by cursor (as `user`); `between` runs after every page. `next_base` is what later
/// pages are asked with (the filters may be left to the cursor).
async fn walk_directory(
    app: &TestApp,
    base: &str,
    next_base: &str,
    mut between: impl AsyncFnMut(),
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut current = page(app, base, Some("u1")).await;
    loop {
        seen.extend(ids(&current));
        let Some(cursor) = next_cursor(&current) else {
            break;
        };
        between().await;
        current = page(app, &with_cursor(next_base, &cursor), Some("u1")).await;
    }
    seen
}

async fn ids_in_order(app: &TestApp, sql: &str) -> Vec<String> {
    let admin = app.admin().await;
    let ids = sqlx::query_scalar(sql).fetch_all(&admin).await.unwrap();
    admin.close().await;
    ids
}

#[tokio::test]
async fn organizations_walk_by_name_then_id_once_each_while_organizations_are_added() {
    let app = spawn_seeded(0).await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    // 120 more organisations, three to a name: the id breaks the ties.
    sqlx::raw_sql(
        "INSERT INTO organizations (id, name, url) \
         SELECT 'org-x' || lpad(n::text, 3, '0'), 'Tied ' || (n / 3), 'https://x.example' \
         FROM generate_series(1, 120) n",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let expected = ids_in_order(&app, "SELECT id FROM organizations ORDER BY name, id").await;
    assert_eq!(expected.len(), 140);
    // After each page the pipeline adds one organisation named to sort first (behind the
    // walker) and one named to sort last (ahead of it).
    let mut added: i32 = 0;
    let seen = walk_directory(&app, "/organizations?limit=9", "/organizations?limit=9", async || {
        added += 1;
        sqlx::query(
            "INSERT INTO organizations (id, name, url) VALUES \
             ('org-new-a' || lpad($1::int::text, 3, '0'), 'AAA ' || lpad($1::int::text, 3, '0'), 'https://a.example'), \
             ('org-new-z' || lpad($1::int::text, 3, '0'), 'zzz ' || lpad($1::int::text, 3, '0'), 'https://z.example')",
        )
        .bind(added)
        .execute(&pipeline)
        .await
        .unwrap();
    })
    .await;
    assert_no_repeats(&seen);
    let late: Vec<String> = (1..=added).map(|n| format!("org-new-z{n:03}")).collect();
    let mut want = expected.clone();
    want.extend(late);
    assert_eq!(
        seen, want,
        "every organisation once by name then id, the later ones at the end"
    );
    assert!(!seen.iter().any(|id| id.starts_with("org-new-a")));

    // Bad cursors.
    let cursor = next_cursor(&page(&app, "/organizations?limit=2", None).await).unwrap();
    let journalists = next_cursor(&page(&app, "/journalists?limit=2", None).await).unwrap();
    for (path, code) in [
        (
            format!("/organizations?offset=2&cursor={cursor}"),
            "invalid_query",
        ),
        (
            format!("/organizations?cursor={journalists}"),
            "invalid_cursor",
        ),
        (format!("/journalists?cursor={cursor}"), "invalid_cursor"),
        (
            format!("/organizations?cursor={}", &cursor[..cursor.len() - 4]),
            "invalid_cursor",
        ),
        ("/organizations?cursor=e30".into(), "invalid_cursor"),
    ] {
        assert_problem(app.get(&path, None).await, 400, code).await;
    }
}

#[tokio::test]
async fn journalists_walk_by_name_then_id_keeping_the_organisation_filter() {
    let app = spawn_seeded(0).await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    // 200 more journalists, half of them at org-001, five to a name.
    sqlx::raw_sql(
        "INSERT INTO journalists (id, name, organization_id) \
         SELECT 'jrn-x' || lpad(n::text, 3, '0'), 'Same Name ' || (n / 5), \
                CASE WHEN n % 2 = 0 THEN 'org-001' ELSE 'org-002' END \
         FROM generate_series(1, 200) n",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let all = ids_in_order(&app, "SELECT id FROM journalists ORDER BY name, id").await;
    assert_eq!(all.len(), 300);
    let of_org = ids_in_order(
        &app,
        "SELECT id FROM journalists WHERE organization_id = 'org-001' ORDER BY name, id",
    )
    .await;
    assert_eq!(
        walk_directory(
            &app,
            "/journalists?limit=11",
            "/journalists?limit=11",
            async || {}
        )
        .await,
        all
    );
    // The filter is kept by the cursor: later pages need not repeat it, and may.
    let mut added: i32 = 0;
    let seen = walk_directory(
        &app,
        "/journalists?limit=6&organization_id=org-001",
        "/journalists?limit=6",
        async || {
            added += 1;
            // Ahead of the walker, at org-001 (shows) and at org-002 (does not).
            sqlx::query(
                "INSERT INTO journalists (id, name, organization_id) VALUES \
                 ('jrn-new-1-' || lpad($1::int::text, 3, '0'), 'zzz ' || lpad($1::int::text, 3, '0'), 'org-001'), \
                 ('jrn-new-2-' || lpad($1::int::text, 3, '0'), 'zzz ' || lpad($1::int::text, 3, '0'), 'org-002')",
            )
            .bind(added)
            .execute(&pipeline)
            .await
            .unwrap();
        },
    )
    .await;
    assert_no_repeats(&seen);
    let mut want = of_org.clone();
    want.extend((1..=added).map(|n| format!("jrn-new-1-{n:03}")));
    assert_eq!(seen, want);
    let repeated = walk_directory(
        &app,
        "/journalists?limit=50&organization_id=org-001",
        "/journalists?limit=50&organization_id=org-001",
        async || {},
    )
    .await;
    assert_eq!(repeated.len(), of_org.len() + added as usize);

    // The filter is part of the cursor: another organisation, or none on a filtered cursor's
    // list given a filter, is another list.
    let filtered =
        next_cursor(&page(&app, "/journalists?limit=2&organization_id=org-001", None).await)
            .unwrap();
    let unfiltered = next_cursor(&page(&app, "/journalists?limit=2", None).await).unwrap();
    for (path, code) in [
        (
            format!("/journalists?organization_id=org-002&cursor={filtered}"),
            "invalid_cursor",
        ),
        (
            format!("/journalists?organization_id=org-001&cursor={unfiltered}"),
            "invalid_cursor",
        ),
        (
            format!("/journalists?offset=0&cursor={filtered}"),
            "invalid_query",
        ),
        (
            format!("/organizations?cursor={filtered}"),
            "invalid_cursor",
        ),
    ] {
        assert_problem(app.get(&path, None).await, 400, code).await;
    }
    let page = app
        .get_json(
            &format!("/journalists?organization_id=org-001&cursor={filtered}"),
            None,
        )
        .await;
    assert_eq!(ids(&page)[0], of_org[2]);
}

// --- plans --------------------------------------------------------------------------------------

/// Asserts that a plan reads `index` with `range` in its index condition and never sorts more
/// than the page: any Sort sits above the Limit that cuts the page.
fn assert_range_scan(rows: &[String], table: &str, index: &str, range: &str) {
    let plan = rows.join("\n");
    assert!(
        plan.contains(&format!("Scan using {index} on {table}")),
        "expected {index}:\n{plan}"
    );
    let cond = rows
        .iter()
        .any(|l| l.contains("Index Cond") && l.contains(range));
    assert!(cond, "the cursor is not a range of the index scan:\n{plan}");
    let full_scan = format!("Seq Scan on {table}");
    assert!(!plan.contains(&full_scan), "no full scan expected:\n{plan}");
    if let Some(sort) = rows.iter().position(|l| l.contains("Sort")) {
        let limit = rows.iter().position(|l| l.contains("Limit"));
        assert!(
            limit.is_some_and(|limit| sort < limit),
            "a sort below the page's limit:\n{plan}"
        );
    }
}

#[tokio::test]
async fn a_page_after_a_cursor_is_an_index_range_scan_in_every_list() {
    use news_service::store::articles::bookmarks_query;
    use news_service::store::comments::THREAD_PAGE;
    use news_service::store::directory::{
        DirectoryPage, JOURNALISTS, ORGANIZATIONS, Selection, list_query,
    };
    use shared_auth::Paging;

    let app = spawn_seeded(2000).await;
    let owner = pool_as(&app.db, "news_owner").await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    // Enough rows that reading them all would be costly: 30,000 comments on each of four
    // articles, 2,000 bookmarks for each of 50 readers, 5,000 organisations, 20,000 journalists
    // (5,000 of them at org-b7).
    for article in ["art-000001", "art-000002", "art-000003", "art-000004"] {
        bulk_thread(&app, article, 10_000, 2_000).await;
    }
    sqlx::raw_sql(
        "INSERT INTO bookmarks (article_id, user_id, created_at) \
         SELECT 'art-' || lpad((1 + (n * 7 + u) % 2000)::text, 6, '0'), 'reader-' || u, \
                now() - n * interval '1 second' \
         FROM generate_series(1, 2000) n, generate_series(1, 50) u",
    )
    .execute(&owner)
    .await
    .unwrap();
    sqlx::raw_sql(
        "INSERT INTO organizations (id, name, url) \
         SELECT 'org-b' || n, 'Bulk ' || n, 'https://b.example' FROM generate_series(1, 5000) n; \
         INSERT INTO journalists (id, name, organization_id) \
         SELECT 'jrn-b' || n, 'Bulk Writer ' || n, \
                CASE WHEN n > 15000 THEN 'org-b7' ELSE 'org-b' || (1 + n % 5000) END \
         FROM generate_series(1, 20000) n;",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let admin = app.admin().await;
    sqlx::raw_sql("ANALYZE").execute(&admin).await.unwrap();
    let app_pool = pool_as(&app.db, "news_app").await;
    let paging = Paging::new(Some(20), None).unwrap();

    // Comments: after the path of the thread's 20,000th comment.
    let path: String = sqlx::query_scalar(
        "SELECT path FROM comments WHERE article_id = 'art-000002' ORDER BY path OFFSET 20000 LIMIT 1",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    let rows: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {THREAD_PAGE}"))
        .bind("art-000002")
        .bind(&path)
        .bind(21i64)
        .bind(0i64)
        .fetch_all(&app_pool)
        .await
        .unwrap();
    assert_range_scan(&rows, "comments", "comments_thread_idx", "path > ");

    // Bookmarks: after the 1,000th of one reader's.
    let (at, article): (DateTime<Utc>, String) = sqlx::query_as(
        "SELECT created_at, article_id FROM bookmarks WHERE user_id = 'reader-7' \
         ORDER BY created_at DESC, article_id DESC OFFSET 1000 LIMIT 1",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    let rows: Vec<String> = bookmarks_query("EXPLAIN ", "reader-7", Some((at, article)), paging)
        .build_query_scalar()
        .fetch_all(&app_pool)
        .await
        .unwrap();
    assert_range_scan(
        &rows,
        "bookmarks",
        "bookmarks_user_recent_idx",
        "ROW(created_at, article_id) < ROW(",
    );

    // Organisations and journalists, all and of one organisation, after a name in the middle.
    let after = Some(("Bulk 2500", "org-b2500"));
    let page = Some(DirectoryPage { paging, after });
    let cases = [
        (
            &ORGANIZATIONS,
            "organizations",
            Selection::All,
            "organizations_name_idx",
        ),
        (
            &JOURNALISTS,
            "journalists",
            Selection::All,
            "journalists_name_idx",
        ),
        (
            &JOURNALISTS,
            "journalists",
            Selection::OfOrganization("org-b7"),
            "journalists_organization_name_idx",
        ),
    ];
    for (directory, table, selection, index) in cases {
        for viewer in [None, Some("u1")] {
            let rows: Vec<String> = list_query("EXPLAIN ", directory, selection, viewer, page)
                .build_query_scalar()
                .fetch_all(&app_pool)
                .await
                .unwrap();
            assert_range_scan(&rows, table, index, "ROW(name, id) > ROW(");
        }
    }
}
