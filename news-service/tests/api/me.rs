//! The caller's own lists: `/me/bookmarks`, `/me/following`, `/me/feed`.

use serde_json::{Value, json};

use crate::helpers::{assert_problem, ids, spawn_with_fixture};

#[tokio::test]
async fn personal_lists_need_a_token() {
    let app = spawn_with_fixture().await;
    for path in ["/me/bookmarks", "/me/following", "/me/feed"] {
        assert_problem(app.get(path, None).await, 401, "missing_token").await;
    }
}

#[tokio::test]
async fn bookmarks_most_recently_bookmarked_first() {
    let app = spawn_with_fixture().await;
    for id in ["art-5", "art-1", "art-4"] {
        assert_eq!(
            app.post(&format!("/articles/{id}/bookmark"), "u1")
                .await
                .status(),
            200
        );
    }
    app.post("/articles/art-2/bookmark", "someone-else").await;
    let response = app.get("/me/bookmarks", Some("u1")).await;
    assert_eq!(response.headers()["cache-control"], "private, no-store");
    let page: Value = response.json().await.unwrap();
    assert_eq!(ids(&page), ["art-4", "art-1", "art-5"]);
    assert_eq!(page["data"][0]["viewer"]["bookmarked"], true);
    assert_eq!(page["data"][0]["bookmark_count"], 1);
    assert_eq!(
        page["data"][0]["organization"],
        json!({"id": "org-b", "name": "Beta Times"})
    );
    let page = app
        .get_json("/me/bookmarks?limit=2&offset=1", Some("u1"))
        .await;
    assert_eq!(ids(&page), ["art-1", "art-5"]);
    assert_eq!(page["next_offset"], Value::Null);
    app.delete("/articles/art-1/bookmark", "u1").await;
    assert_eq!(
        ids(&app.get_json("/me/bookmarks", Some("u1")).await),
        ["art-4", "art-5"]
    );
}

#[tokio::test]
async fn following_lists_journalists_and_organizations() {
    let app = spawn_with_fixture().await;
    app.post("/journalists/jrn-3/follow", "u1").await;
    app.post("/journalists/jrn-2/follow", "u1").await;
    app.post("/organizations/org-c/follow", "u1").await;
    app.post("/organizations/org-a/follow", "u2").await;
    let following = app.get_json("/me/following", Some("u1")).await;
    assert_eq!(
        following,
        json!({
            "journalists": [
                {"id": "jrn-2", "name": "Amy Reporter", "organization_id": "org-a", "follower_count": 1, "viewer": {"following": true}},
                {"id": "jrn-3", "name": "Bob Columnist", "organization_id": "org-b", "follower_count": 1, "viewer": {"following": true}},
            ],
            "organizations": [
                {"id": "org-c", "name": "Cobalt Daily", "url": "https://cobalt.example", "follower_count": 1, "viewer": {"following": true}},
            ],
        })
    );
    assert_eq!(
        app.get_json("/me/following", Some("nobody")).await,
        json!({"journalists": [], "organizations": []})
    );
}

#[tokio::test]
async fn feed_has_articles_of_followed_journalists_or_organizations_newest_first() {
    let app = spawn_with_fixture().await;
    assert_eq!(app.get_json("/me/feed", Some("u1")).await["count"], 0);
    app.post("/journalists/jrn-1/follow", "u1").await; // art-1, art-5
    app.post("/organizations/org-b/follow", "u1").await; // art-3, art-4
    let page = app.get_json("/me/feed", Some("u1")).await;
    assert_eq!(ids(&page), ["art-4", "art-3", "art-1", "art-5"]);
    assert_eq!(
        page["data"][2]["viewer"],
        json!({"liked": false, "bookmarked": false, "following_journalist": true, "following_organization": false})
    );
    // Cursor paging through the feed.
    let first = app.get_json("/me/feed?limit=3", Some("u1")).await;
    assert_eq!(ids(&first), ["art-4", "art-3", "art-1"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = app
        .get_json(&format!("/me/feed?limit=3&cursor={cursor}"), Some("u1"))
        .await;
    assert_eq!(ids(&second), ["art-5"]);
    assert_eq!(second["next_cursor"], Value::Null);
    assert_problem(
        app.get(&format!("/me/feed?offset=1&cursor={cursor}"), Some("u1"))
            .await,
        400,
        "invalid_query",
    )
    .await;
    // An article-list cursor is not a feed cursor.
    let list = app.get_json("/articles?limit=1", None).await;
    let list_cursor = list["next_cursor"].as_str().unwrap();
    assert_problem(
        app.get(&format!("/me/feed?cursor={list_cursor}"), Some("u1"))
            .await,
        400,
        "invalid_cursor",
    )
    .await;
}
