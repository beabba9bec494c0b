//! What the curation pipeline's writes do to readers' state (docs/news.md, "When the catalogue
//! changes"): the pipeline (role news_pipeline: INSERT and UPDATE on organisations, journalists
//! and articles, nothing else) can neither delete a row nor change an id readers engaged with;
//! an article moved to another journalist or organisation moves between feeds with its counts;
//! a cursor continues from its place whatever happened to the row it names; and a like or a
//! follow racing a rename or an operator's delete of its target is a 404 that writes nothing.

use std::time::{Duration, Instant};

use reqwest::{RequestBuilder, Response};
use serde_json::{Value, json};
use shared_auth::testing::token;
use sqlx::{PgPool, Postgres, Transaction};

use crate::counts::assert_counts_exact;
use crate::helpers::{TestApp, assert_problem, ids, pool_as, spawn_with_fixture};
use crate::search_walks::wrong_counts;

/// `statement` run by `pool`'s role fails with SQLSTATE `code`.
async fn assert_refused(pool: &PgPool, statement: &str, code: &str) {
    let error = sqlx::query(statement)
        .execute(pool)
        .await
        .expect_err(statement);
    let db_error = error.as_database_error().expect("a database error");
    assert_eq!(
        db_error.code().as_deref(),
        Some(code),
        "{statement}: {db_error}"
    );
}

/// `statement` run as the pipeline changes exactly one row.
async fn pipeline_writes(app: &TestApp, statement: &str) {
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    let done = sqlx::query(statement).execute(&pipeline).await.unwrap();
    assert_eq!(done.rows_affected(), 1, "{statement}");
    pipeline.close().await;
}

/// POST `path` as `user`, asserting 200.
async fn engage(app: &TestApp, path: &str, user: &str) {
    assert_eq!(app.post(path, user).await.status(), 200, "POST {path}");
}

/// Every catalogue write the pipeline is not granted is refused: nothing it does can leave a
/// like, bookmark, comment or follow without its target.
#[tokio::test]
async fn the_pipeline_cannot_delete_or_truncate_the_catalogue() {
    let app = spawn_with_fixture().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    for statement in [
        "DELETE FROM articles WHERE id = 'art-1'",
        "DELETE FROM journalists WHERE id = 'jrn-2'",
        "DELETE FROM organizations WHERE id = 'org-c'",
        "TRUNCATE articles, journalists, organizations",
        "DELETE FROM likes",
        "INSERT INTO article_stats (article_id, slot) VALUES ('art-1', 1)",
    ] {
        assert_refused(&pipeline, statement, "42501").await;
    }
    assert_eq!(app.count("SELECT count(*) FROM articles").await, 5);
}

/// The foreign keys of likes, bookmarks, comments, follows and counters refuse (23503) to
/// change an id they point at, so the pipeline cannot strand readers' state under an old id;
/// an id nobody engaged with may change, and the old one is then gone everywhere.
#[tokio::test]
async fn an_id_readers_engaged_with_cannot_be_changed_by_the_pipeline() {
    let app = spawn_with_fixture().await;
    engage(&app, "/articles/art-1/like", "u1").await;
    engage(&app, "/articles/art-5/bookmark", "u1").await;
    engage(&app, "/journalists/jrn-2/follow", "u1").await;
    engage(&app, "/organizations/org-c/follow", "u1").await;
    let comment = json!({"article_id": "art-3", "text": "First."});
    assert_eq!(app.post_comment("u1", &comment, None).await.status(), 201);
    // Liked then unliked: no like left, but its counter row still points at the id.
    engage(&app, "/articles/art-4/like", "u2").await;
    assert_eq!(app.delete("/articles/art-4/like", "u2").await.status(), 200);

    let pipeline = pool_as(&app.db, "news_pipeline").await;
    for statement in [
        "UPDATE articles SET id = 'art-1x' WHERE id = 'art-1'",
        "UPDATE articles SET id = 'art-5x' WHERE id = 'art-5'",
        "UPDATE articles SET id = 'art-3x' WHERE id = 'art-3'",
        "UPDATE articles SET id = 'art-4x' WHERE id = 'art-4'",
        "UPDATE journalists SET id = 'jrn-2x' WHERE id = 'jrn-2'",
        "UPDATE organizations SET id = 'org-cx' WHERE id = 'org-c'",
        // Articles point at their journalist and organisation too.
        "UPDATE journalists SET id = 'jrn-1x' WHERE id = 'jrn-1'",
        "UPDATE organizations SET id = 'org-ax' WHERE id = 'org-a'",
    ] {
        assert_refused(&pipeline, statement, "23503").await;
    }
    let after = assert_counts_exact(&app, "after the refused renames").await;
    assert_eq!(after, 5, "one like, bookmark, comment and two follows");

    pipeline_writes(&app, "UPDATE articles SET id = 'art-2x' WHERE id = 'art-2'").await;
    assert_problem(
        app.get("/articles/art-2", None).await,
        404,
        "article_not_found",
    )
    .await;
    assert_problem(
        app.post("/articles/art-2/like", "u1").await,
        404,
        "article_not_found",
    )
    .await;
    let comment = json!({"article_id": "art-2", "text": "Late."});
    let answer = app.post_comment("u1", &comment, None).await;
    assert_problem(answer, 422, "unknown_article").await;
    let renamed = app.get_json("/articles/art-2x", Some("u1")).await;
    assert_eq!(renamed["like_count"], 0);
    assert_eq!(renamed["viewer"]["following_journalist"], true);
    assert_counts_exact(&app, "after renaming an article nobody engaged with").await;
}

/// Waits until `n` requests of the service wait for a lock.
async fn wait_for_blocked_requests(app: &TestApp, n: i64) {
    let started = Instant::now();
    let sql = "SELECT count(*) FROM pg_stat_activity \
               WHERE usename = 'news_app' AND wait_event_type = 'Lock' \
                 AND datname = current_database()";
    while app.count(sql).await < n {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no request blocked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// POSTs without a body to each of `paths`, as `user`.
fn posts(app: &TestApp, paths: &[&str], user: &str) -> Vec<RequestBuilder> {
    let post = |path: &&str| app.client.post(app.url(path)).bearer_auth(token(user));
    paths.iter().map(post).collect()
}

/// Sends `requests` while `writer` holds its uncommitted change of their targets, waits until
/// each waits for it, then commits it: the answers, in the order of `requests`.
async fn race_with(
    app: &TestApp,
    writer: Transaction<'static, Postgres>,
    requests: Vec<RequestBuilder>,
) -> Vec<Response> {
    let sent = requests.len();
    let running: Vec<_> = requests
        .into_iter()
        .map(|request| tokio::spawn(async move { request.send().await.unwrap() }))
        .collect();
    wait_for_blocked_requests(app, i64::try_from(sent).unwrap()).await;
    writer.commit().await.unwrap();
    let mut answers = Vec::new();
    for request in running {
        answers.push(request.await.unwrap());
    }
    answers
}

/// A like and a follow sent while the pipeline renames their targets wait for its commit, then
/// find no target under the id they name: 404, nothing written, counts exact.
#[tokio::test]
async fn a_like_or_follow_racing_a_rename_is_404_and_writes_nothing() {
    let app = spawn_with_fixture().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    let mut rename = pipeline.begin().await.unwrap();
    for statement in [
        "UPDATE articles SET id = 'art-2x' WHERE id = 'art-2'",
        "UPDATE organizations SET id = 'org-cx' WHERE id = 'org-c'",
    ] {
        sqlx::query(statement).execute(&mut *rename).await.unwrap();
    }
    let paths = ["/articles/art-2/like", "/organizations/org-c/follow"];
    let answers = race_with(&app, rename, posts(&app, &paths, "u1")).await;
    let codes = ["article_not_found", "organization_not_found"];
    for (answer, code) in answers.into_iter().zip(codes) {
        assert_problem(answer, 404, code).await;
    }
    assert_eq!(app.count("SELECT count(*) FROM likes").await, 0);
    assert_eq!(
        app.count("SELECT count(*) FROM organization_follows").await,
        0
    );
    assert_eq!(app.count("SELECT count(*) FROM article_stats").await, 0);
    assert_eq!(
        app.get_json("/articles/art-2x", None).await["like_count"],
        0
    );
    assert_counts_exact(&app, "after the raced renames").await;
}

/// The same race with an operator's delete (the owner role; the pipeline cannot delete): the
/// delete takes the target's likes, comments, follows and counter rows with it, and the late
/// like or follow is a 404, the late comment or reply a 422, leaving no row or counter behind.
#[tokio::test]
async fn engagement_racing_the_delete_of_its_target_is_refused_and_leaves_nothing() {
    let app = spawn_with_fixture().await;
    engage(&app, "/articles/art-4/like", "u2").await;
    engage(&app, "/journalists/jrn-2/follow", "u2").await;
    let first = json!({"article_id": "art-4", "text": "First."});
    let answer = app.post_comment("u2", &first, None).await;
    let parent = answer.json::<Value>().await.unwrap()["id"].clone();
    let owner = pool_as(&app.db, "news_owner").await;
    let mut delete = owner.begin().await.unwrap();
    for statement in [
        "DELETE FROM articles WHERE id IN ('art-4', 'art-2')",
        "DELETE FROM journalists WHERE id = 'jrn-2'",
    ] {
        sqlx::query(statement).execute(&mut *delete).await.unwrap();
    }
    let paths = ["/articles/art-4/like", "/journalists/jrn-2/follow"];
    let mut requests = posts(&app, &paths, "u1");
    let comment = |body: Value| {
        app.client
            .post(app.url("/comments"))
            .bearer_auth(token("u1"))
            .json(&body)
    };
    requests.push(comment(json!({"article_id": "art-4", "text": "Late."})));
    requests.push(comment(
        json!({"article_id": "art-4", "parent_id": parent, "text": "Late."}),
    ));
    let mut answers = race_with(&app, delete, requests).await.into_iter();
    for code in ["article_not_found", "journalist_not_found"] {
        assert_problem(answers.next().unwrap(), 404, code).await;
    }
    assert_problem(answers.next().unwrap(), 422, "unknown_article").await;
    // The reply's article and parent are both gone: either is named.
    let reply = answers.next().unwrap();
    assert_eq!(reply.status(), 422);
    let code = reply.json::<Value>().await.unwrap()["code"].clone();
    assert!(
        code == "unknown_article" || code == "unknown_parent",
        "{code}"
    );
    for table in [
        "likes",
        "comments",
        "article_stats",
        "journalist_follows",
        "journalist_stats",
    ] {
        let left = app.count(&format!("SELECT count(*) FROM {table}")).await;
        assert_eq!(left, 0, "{table}");
    }
    assert_counts_exact(&app, "after the raced deletes").await;
}

/// An article the pipeline gives another journalist and organisation keeps its likes,
/// bookmarks and comments, leaves the feed of the old ones' followers for the new ones', and
/// its anonymous answer gets a new ETag.
#[tokio::test]
async fn an_article_moved_to_another_journalist_moves_between_feeds_with_its_counts() {
    let app = spawn_with_fixture().await;
    engage(&app, "/journalists/jrn-1/follow", "old").await;
    engage(&app, "/journalists/jrn-3/follow", "new").await;
    engage(&app, "/articles/art-1/like", "reader").await;
    engage(&app, "/articles/art-1/bookmark", "reader").await;
    let before = app.get("/articles/art-1", None).await;
    let etag = before.headers()["etag"].to_str().unwrap().to_owned();

    pipeline_writes(
        &app,
        "UPDATE articles SET journalist_id = 'jrn-3', organization_id = 'org-b' WHERE id = 'art-1'",
    )
    .await;
    assert_eq!(ids(&app.get_json("/me/feed", Some("old")).await), ["art-5"]);
    let feed = app.get_json("/me/feed", Some("new")).await;
    assert_eq!(ids(&feed), ["art-4", "art-3", "art-1"]);
    let moved = app.get_json("/articles/art-1", Some("new")).await;
    assert_eq!(moved["journalist"]["id"], "jrn-3");
    assert_eq!(moved["viewer"]["following_journalist"], true);
    assert_eq!(
        (moved["like_count"].clone(), moved["bookmark_count"].clone()),
        (json!(1), json!(1))
    );
    let listed = app.get_json("/articles?journalist_id=jrn-1", None).await;
    assert_eq!(ids(&listed), ["art-5"]);
    let after = app.get("/articles/art-1", None).await;
    assert_ne!(after.headers()["etag"].to_str().unwrap(), etag);
    assert_counts_exact(&app, "after moving an article").await;
}

/// The number of articles of `language` that the lexeme counts hold.
async fn articles_counted(app: &TestApp, language: &str) -> i64 {
    let sql = format!(
        "SELECT coalesce(sum(articles), 0)::bigint FROM search_lexemes \
          WHERE language = '{language}' AND lexeme = ''"
    );
    app.count(&sql).await
}

/// An article the pipeline gives another language moves between the languages' lexeme counts
/// (what a search plans by) and is found by search in it; a language left without
/// articles is searched without error.
#[tokio::test]
async fn an_article_given_another_language_moves_between_the_lexeme_counts() {
    let app = spawn_with_fixture().await;
    let search = |q: &str| format!("/search?q={q}&sort=newest");
    pipeline_writes(
        &app,
        "UPDATE articles SET language = 'es', title = 'Elecciones en el puerto' WHERE id = 'art-1'",
    )
    .await;
    assert_eq!(
        (
            articles_counted(&app, "en").await,
            articles_counted(&app, "es").await
        ),
        (4, 1)
    );
    assert_eq!(
        ids(&app.get_json(&search("elección"), None).await),
        ["art-1"]
    );
    pipeline_writes(
        &app,
        "UPDATE articles SET language = 'en' WHERE id = 'art-1'",
    )
    .await;
    assert_eq!(
        (
            articles_counted(&app, "en").await,
            articles_counted(&app, "es").await
        ),
        (5, 0)
    );
    // Searched in every language again, Spanish (now without articles) included.
    assert_eq!(
        ids(&app.get_json(&search("elecciones"), None).await),
        ["art-1"]
    );
    let admin = app.admin().await;
    assert_eq!(wrong_counts(&admin).await, 0);
}

/// A page's `next_cursor`, asserting there is one.
fn cursor_of(page: &Value) -> String {
    page["next_cursor"]
        .as_str()
        .expect("a next_cursor")
        .to_owned()
}

/// The page after `cursor` of the list at `path` (which holds a query already).
async fn next_page(app: &TestApp, path: &str, cursor: &str, user: Option<&str>) -> Vec<String> {
    ids(&app.get_json(&format!("{path}&cursor={cursor}"), user).await)
}

/// A cursor names the last row served by its sort keys, not by the row: the next page starts
/// right after that place in the order, whether the row was since moved elsewhere in the list,
/// moved out of a filtered list, or deleted.
#[tokio::test]
async fn cursors_continue_from_their_place_when_the_row_they_name_moves_or_goes() {
    let app = spawn_with_fixture().await;
    let first = app.get_json("/articles?limit=2", None).await;
    assert_eq!(ids(&first), ["art-4", "art-3"]);
    pipeline_writes(
        &app,
        "UPDATE articles SET published_at = '2027-01-01Z' WHERE id = 'art-3'",
    )
    .await;
    let next = next_page(&app, "/articles?limit=2", &cursor_of(&first), None).await;
    assert_eq!(
        next,
        ["art-2", "art-1"],
        "after the cursor's article moved ahead"
    );

    let first = app.get_json("/articles?limit=3", None).await;
    assert_eq!(ids(&first), ["art-3", "art-4", "art-2"]);
    let owner = pool_as(&app.db, "news_owner").await;
    sqlx::query("DELETE FROM articles WHERE id = 'art-2'")
        .execute(&owner)
        .await
        .unwrap();
    let next = next_page(&app, "/articles?limit=3", &cursor_of(&first), None).await;
    assert_eq!(
        next,
        ["art-1", "art-5"],
        "after the cursor's article was deleted"
    );

    for id in ["art-5", "art-1", "art-4"] {
        engage(&app, &format!("/articles/{id}/bookmark"), "u1").await;
    }
    let first = app.get_json("/me/bookmarks?limit=2", Some("u1")).await;
    assert_eq!(ids(&first), ["art-4", "art-1"]);
    sqlx::query("DELETE FROM articles WHERE id = 'art-1'")
        .execute(&owner)
        .await
        .unwrap();
    let next = next_page(
        &app,
        "/me/bookmarks?limit=2",
        &cursor_of(&first),
        Some("u1"),
    )
    .await;
    assert_eq!(
        next,
        ["art-5"],
        "after the cursor's bookmarked article was deleted"
    );

    let first = app
        .get_json("/journalists?organization_id=org-a&limit=1", None)
        .await;
    assert_eq!(ids(&first), ["jrn-2"]);
    pipeline_writes(
        &app,
        "UPDATE journalists SET organization_id = 'org-b' WHERE id = 'jrn-2'",
    )
    .await;
    let path = "/journalists?organization_id=org-a&limit=1";
    assert_eq!(
        next_page(&app, path, &cursor_of(&first), None).await,
        ["jrn-1"]
    );
}

/// The feed's cursor continues past an article that left the feed (moved to a journalist and
/// organisation the reader does not follow), and a thread's cursor of a deleted article is the
/// article's 404, as the thread itself is.
#[tokio::test]
async fn feed_and_thread_cursors_of_rows_that_left_their_list() {
    let app = spawn_with_fixture().await;
    engage(&app, "/organizations/org-a/follow", "u1").await;
    let first = app.get_json("/me/feed?limit=1", Some("u1")).await;
    assert_eq!(ids(&first), ["art-2"]);
    pipeline_writes(
        &app,
        "UPDATE articles SET journalist_id = 'jrn-3', organization_id = 'org-b' WHERE id = 'art-2'",
    )
    .await;
    let next = next_page(&app, "/me/feed?limit=1", &cursor_of(&first), Some("u1")).await;
    assert_eq!(next, ["art-1"]);

    for text in ["One.", "Two."] {
        let comment = json!({"article_id": "art-4", "text": text});
        assert_eq!(app.post_comment("u1", &comment, None).await.status(), 201);
    }
    let first = app.get_json("/articles/art-4/comments?limit=1", None).await;
    let owner = pool_as(&app.db, "news_owner").await;
    // An operator's delete of the comment a thread cursor names: the walk goes on after it.
    let named = first["data"][0]["id"].as_str().unwrap().to_owned();
    sqlx::query("DELETE FROM comments WHERE id = $1::uuid")
        .bind(&named)
        .execute(&owner)
        .await
        .unwrap();
    let thread = "/articles/art-4/comments?limit=1";
    let next = app
        .get_json(&format!("{thread}&cursor={}", cursor_of(&first)), None)
        .await;
    assert_eq!(next["data"][0]["text"], "Two.");
    assert_counts_exact(&app, "after deleting a comment").await;
    sqlx::query("DELETE FROM articles WHERE id = 'art-4'")
        .execute(&owner)
        .await
        .unwrap();
    let path = format!(
        "/articles/art-4/comments?limit=1&cursor={}",
        cursor_of(&first)
    );
    assert_problem(app.get(&path, None).await, 404, "article_not_found").await;
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 0);
    assert_counts_exact(&app, "after deleting a commented article").await;
}
