//! An outside review of the news writes and lists against the contract (docs/news.md,
//! docs/conventions.md): comment input, `Location`, `comment_count`, thread paging to the end,
//! paging rules on every list, following and the feed.

use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_problem, ids, spawn_with_fixture};

async fn create(app: &TestApp, body: Value) -> Value {
    let response = app.post_comment("u", &body, None).await;
    assert_eq!(response.status(), 201, "{body}");
    response.json().await.unwrap()
}

fn fields(problem: &Value) -> Vec<String> {
    let mut names: Vec<String> = problem["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("errors in {problem}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// "`errors` is present on 422 validation failures, one entry per bad field": a body with
/// several bad fields names every one of them.
#[tokio::test]
async fn several_bad_comment_fields_are_each_named() {
    let app = spawn_with_fixture().await;
    let cases = [
        (
            json!({"article_id": 5, "text": 7}),
            vec!["article_id", "text"],
        ),
        (
            json!({"article_id": "art-1", "text": 7, "parent_id": 9}),
            vec!["parent_id", "text"],
        ),
        (
            json!({"article_id": "art-1", "text": 7, "colour": "red"}),
            vec!["colour", "text"],
        ),
        (json!({"parent_id": null}), vec!["article_id", "text"]),
    ];
    for (body, expected) in cases {
        let problem = assert_problem(
            app.post_comment("u", &body, None).await,
            422,
            "validation_failed",
        )
        .await;
        assert_eq!(fields(&problem), expected, "{body}: {problem}");
    }
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 0);
}

/// `text` is trimmed (Unicode white space at both ends, inside kept) and its length is counted
/// after trimming, in code points: 10,000 emoji fit, padded or not; 10,001 do not.
#[tokio::test]
async fn comment_text_is_trimmed_then_counted_in_code_points() {
    let app = spawn_with_fixture().await;
    let comment = create(
        &app,
        json!({"article_id": "art-1", "text": "\u{3000}\u{a0} \t\nhello  \n world\r\n \u{2003}"}),
    )
    .await;
    assert_eq!(comment["text"], "hello  \n world");

    let emoji = "😀".repeat(10_000);
    let padded = format!("   {emoji}\n\n");
    let comment = create(&app, json!({"article_id": "art-1", "text": padded})).await;
    assert_eq!(comment["text"], emoji.as_str());

    let too_long = format!("{emoji}😀");
    let problem = assert_problem(
        app.post_comment("u", &json!({"article_id": "art-1", "text": too_long}), None)
            .await,
        422,
        "validation_failed",
    )
    .await;
    assert_eq!(fields(&problem), ["text"]);
    for blank in ["\u{3000}", "\u{a0}\u{2028}", "\r\n"] {
        let body = json!({"article_id": "art-1", "text": blank});
        assert_problem(
            app.post_comment("u", &body, None).await,
            422,
            "validation_failed",
        )
        .await;
    }
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 2);
}

/// 201 with `Location: /v1/news/comments/{id}` that reads the same comment back; `parent_id`
/// null and absent are both top level; ids are UUIDv7 and times RFC 3339 with `Z`.
#[tokio::test]
async fn a_created_comment_is_where_its_location_says() {
    let app = spawn_with_fixture().await;
    for body in [
        json!({"article_id": "art-1", "text": "absent parent"}),
        json!({"article_id": "art-1", "text": "null parent", "parent_id": null}),
    ] {
        let response = app.post_comment("author", &body, None).await;
        assert_eq!(response.status(), 201);
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let comment: Value = response.json().await.unwrap();
        let id = comment["id"].as_str().unwrap();
        assert_eq!(location, format!("/v1/news/comments/{id}"));
        assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
        assert_eq!(comment["parent_id"], Value::Null);
        assert_eq!(comment["depth"], 0);
        assert_eq!(comment["author_id"], "author");
        assert!(
            comment["created_at"].as_str().unwrap().ends_with('Z'),
            "{comment}"
        );
        let read = app
            .client
            .get(format!("{}{location}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200);
        assert_eq!(read.json::<Value>().await.unwrap(), comment);
    }
}

/// `comment_count` counts replies too, on the article, the list, search hits and bookmarks.
#[tokio::test]
async fn comment_count_counts_replies_everywhere_the_article_is_shown() {
    let app = spawn_with_fixture().await;
    let top = create(&app, json!({"article_id": "art-2", "text": "top"})).await;
    let reply = create(
        &app,
        json!({"article_id": "art-2", "text": "reply", "parent_id": top["id"]}),
    )
    .await;
    create(
        &app,
        json!({"article_id": "art-2", "text": "reply to reply", "parent_id": reply["id"]}),
    )
    .await;
    create(&app, json!({"article_id": "art-1", "text": "elsewhere"})).await;
    app.post("/articles/art-2/bookmark", "u").await;

    let of_art_2 = |page: &Value| -> Value {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "art-2")
            .unwrap()["comment_count"]
            .clone()
    };
    assert_eq!(
        app.get_json("/articles/art-2", None).await["comment_count"],
        3
    );
    assert_eq!(
        app.get_json("/articles/art-2", Some("u")).await["comment_count"],
        3
    );
    assert_eq!(of_art_2(&app.get_json("/articles", None).await), 3);
    assert_eq!(of_art_2(&app.get_json("/search?q=title", None).await), 3);
    assert_eq!(of_art_2(&app.get_json("/me/bookmarks", Some("u")).await), 3);
    assert_eq!(
        app.get_json("/articles/art-1", None).await["comment_count"],
        1
    );
}

/// Replies written out of order (a reply to an old comment after a newer top-level one) come
/// back in thread order, and paging by offset or by cursor reads exactly that order to its end.
#[tokio::test]
async fn an_interleaved_thread_pages_to_its_end_by_offset_and_by_cursor() {
    let app = spawn_with_fixture().await;
    let a = create(&app, json!({"article_id": "art-3", "text": "a"})).await;
    let b = create(&app, json!({"article_id": "art-3", "text": "b"})).await;
    let a1 = create(
        &app,
        json!({"article_id": "art-3", "text": "a1", "parent_id": a["id"]}),
    )
    .await;
    let b1 = create(
        &app,
        json!({"article_id": "art-3", "text": "b1", "parent_id": b["id"]}),
    )
    .await;
    let a2 = create(
        &app,
        json!({"article_id": "art-3", "text": "a2", "parent_id": a["id"]}),
    )
    .await;
    let a1x = create(
        &app,
        json!({"article_id": "art-3", "text": "a1x", "parent_id": a1["id"]}),
    )
    .await;
    let c = create(&app, json!({"article_id": "art-3", "text": "c"})).await;
    let b1x = create(
        &app,
        json!({"article_id": "art-3", "text": "b1x", "parent_id": b1["id"]}),
    )
    .await;
    let expected: Vec<String> = [&a, &a1, &a1x, &a2, &b, &b1, &b1x, &c]
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();

    let whole = app
        .get_json("/articles/art-3/comments?limit=100", None)
        .await;
    assert_eq!(ids(&whole), expected);
    assert_eq!(whole["count"], 8);
    assert_eq!(whole["next_offset"], Value::Null);
    assert_eq!(whole["next_cursor"], Value::Null);

    let mut by_offset = Vec::new();
    let mut offset = Some(0);
    while let Some(o) = offset {
        let page = app
            .get_json(
                &format!("/articles/art-3/comments?limit=3&offset={o}"),
                None,
            )
            .await;
        assert_eq!(page["offset"], o);
        assert_eq!(page["limit"], 3);
        assert_eq!(page["count"], page["data"].as_array().unwrap().len());
        by_offset.extend(ids(&page));
        offset = page["next_offset"].as_u64();
    }
    assert_eq!(by_offset, expected);

    let mut by_cursor = Vec::new();
    let mut path = "/articles/art-3/comments?limit=3".to_owned();
    loop {
        let page = app.get_json(&path, None).await;
        by_cursor.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/articles/art-3/comments?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(by_cursor, expected);
    // An exact multiple of the page size ends with null, not with an empty page after it.
    let page = app
        .get_json("/articles/art-3/comments?limit=4&offset=4", None)
        .await;
    assert_eq!(page["count"], 4);
    assert_eq!(page["next_offset"], Value::Null, "{page}");
    assert_eq!(page["next_cursor"], Value::Null, "{page}");
}

/// The paging rules of every list: out of range or not an integer is 400 `invalid_query`,
/// `cursor` with `offset` is 400 `invalid_query`, a cursor that does not decode is 400
/// `invalid_cursor`, `cursor=` is no cursor, and the edges of the ranges are accepted.
#[tokio::test]
async fn every_list_applies_the_paging_rules() {
    let app = spawn_with_fixture().await;
    app.post("/articles/art-1/bookmark", "u").await;
    app.post("/journalists/jrn-1/follow", "u").await;
    create(&app, json!({"article_id": "art-1", "text": "x"})).await;
    let lists = [
        "/articles",
        "/articles?organization_id=org-a",
        "/articles/art-1/comments",
        "/organizations",
        "/journalists",
        "/journalists?organization_id=org-a",
        "/me/bookmarks",
        "/me/feed",
    ];
    for list in lists {
        let join = if list.contains('?') { '&' } else { '?' };
        for bad in [
            "limit=0",
            "limit=101",
            "limit=abc",
            "limit=-1",
            "limit=1.5",
            "limit=",
            "offset=-1",
            "offset=10001",
            "offset=x",
            "offset=0&cursor=abc",
        ] {
            let response = app.get(&format!("{list}{join}{bad}"), Some("u")).await;
            assert_problem(response, 400, "invalid_query").await;
        }
        for bad in ["cursor=abc", "cursor=%00", "cursor=eyJ4IjoxfQ"] {
            let response = app.get(&format!("{list}{join}{bad}"), Some("u")).await;
            assert_problem(response, 400, "invalid_cursor").await;
        }
        let plain = app.get_json(list, Some("u")).await;
        assert_eq!(plain["limit"], 20, "{list}");
        assert_eq!(plain["offset"], 0, "{list}");
        assert_eq!(
            plain["count"],
            plain["data"].as_array().unwrap().len(),
            "{list}"
        );
        assert_eq!(plain["next_offset"], Value::Null, "{list}");
        assert_eq!(plain["next_cursor"], Value::Null, "{list}");
        let empty_cursor = app
            .get_json(&format!("{list}{join}cursor="), Some("u"))
            .await;
        assert_eq!(empty_cursor, plain, "{list}: cursor= is no cursor");
        for edge in ["limit=1", "limit=100", "offset=10000"] {
            app.get_json(&format!("{list}{join}{edge}"), Some("u"))
                .await;
        }
        let far = app
            .get_json(&format!("{list}{join}offset=10000"), Some("u"))
            .await;
        assert_eq!(far["count"], 0, "{list}");
        assert_eq!(far["next_offset"], Value::Null, "{list}");
    }
}

/// `/me/following`: counts include other followers, the lists change with follows and unfollows;
/// the feed drops an unfollowed source's articles and lists an article once when both its
/// journalist and its organisation are followed.
#[tokio::test]
async fn following_and_the_feed_follow_unfollows() {
    let app = spawn_with_fixture().await;
    for (path, user) in [
        ("/journalists/jrn-1/follow", "me"),
        ("/journalists/jrn-1/follow", "other"),
        ("/organizations/org-a/follow", "me"),
        ("/organizations/org-b/follow", "other"),
    ] {
        assert_eq!(app.post(path, user).await.status(), 200);
    }
    let following = app.get_json("/me/following", Some("me")).await;
    assert_eq!(following["journalists"][0]["id"], "jrn-1");
    assert_eq!(following["journalists"][0]["follower_count"], 2);
    assert_eq!(following["organizations"][0]["id"], "org-a");
    assert_eq!(following["organizations"][0]["follower_count"], 1);
    assert_eq!(following["organizations"].as_array().unwrap().len(), 1);

    // jrn-1 writes for org-a: art-1 and art-5 are in the feed once each.
    let feed = app.get_json("/me/feed", Some("me")).await;
    assert_eq!(ids(&feed), ["art-2", "art-1", "art-5"]);
    assert_eq!(
        feed["data"][1]["viewer"],
        json!({"liked": false, "bookmarked": false, "following_journalist": true, "following_organization": true})
    );

    assert_eq!(
        app.delete("/organizations/org-a/follow", "me")
            .await
            .status(),
        200
    );
    let feed = app.get_json("/me/feed", Some("me")).await;
    assert_eq!(ids(&feed), ["art-1", "art-5"]);
    assert_eq!(
        feed["data"][0]["viewer"],
        json!({"liked": false, "bookmarked": false, "following_journalist": true, "following_organization": false})
    );
    assert_eq!(
        app.delete("/journalists/jrn-1/follow", "me").await.status(),
        200
    );
    let feed = app.get_json("/me/feed", Some("me")).await;
    assert_eq!(feed["count"], 0);
    assert_eq!(
        app.get_json("/me/following", Some("me")).await,
        json!({"journalists": [], "organizations": []})
    );
    let other = app.get_json("/me/following", Some("other")).await;
    assert_eq!(other["journalists"][0]["follower_count"], 1);
}

/// Removing what was never there is the same 200 with the flag false and the count unchanged,
/// and an unknown target is 404 for DELETE as for POST.
#[tokio::test]
async fn removing_what_was_never_there_and_unknown_targets() {
    let app = spawn_with_fixture().await;
    app.post("/articles/art-1/like", "someone").await;
    let response = app.delete("/articles/art-1/like", "me").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"article_id": "art-1", "liked": false, "like_count": 1})
    );
    let cases = [
        ("/articles/nope/like", "article_not_found"),
        ("/articles/nope/bookmark", "article_not_found"),
        ("/journalists/nope/follow", "journalist_not_found"),
        ("/organizations/nope/follow", "organization_not_found"),
    ];
    for (path, code) in cases {
        assert_problem(app.delete(path, "me").await, 404, code).await;
        assert_problem(app.post(path, "me").await, 404, code).await;
    }
    assert_eq!(app.count("SELECT count(*) FROM likes").await, 1);
}

/// "`next_offset` is null when there is nothing after this page" and `next_cursor` is "null at
/// the end": a page that ends exactly at the last item has neither, on every list.
#[tokio::test]
async fn a_page_ending_on_the_last_item_says_so_on_every_list() {
    let app = spawn_with_fixture().await;
    for article in ["art-1", "art-2", "art-3"] {
        app.post(&format!("/articles/{article}/bookmark"), "u")
            .await;
    }
    app.post("/organizations/org-b/follow", "u").await;
    create(&app, json!({"article_id": "art-1", "text": "one"})).await;
    create(&app, json!({"article_id": "art-1", "text": "two"})).await;
    let lists = [
        ("/articles?limit=5", 5),
        ("/articles?organization_id=org-a&limit=3", 3),
        ("/organizations?limit=3", 3),
        ("/journalists?limit=3", 3),
        ("/journalists?organization_id=org-a&limit=2", 2),
        ("/articles/art-1/comments?limit=2", 2),
        ("/me/bookmarks?limit=3", 3),
        ("/me/feed?limit=2", 2),
    ];
    for (list, total) in lists {
        let page = app.get_json(list, Some("u")).await;
        assert_eq!(page["count"], total, "{list}: {page}");
        assert_eq!(page["next_offset"], Value::Null, "{list}");
        assert_eq!(page["next_cursor"], Value::Null, "{list}");
        let shorter = app.get_json(&format!("{list}&offset=1"), Some("u")).await;
        assert_eq!(shorter["count"], total - 1, "{list}");
        assert_eq!(shorter["next_offset"], Value::Null, "{list}");
    }
    let search = app.get_json("/search?q=title&limit=5", None).await;
    assert_eq!(search["count"], 5);
    assert_eq!(search["next_cursor"], Value::Null, "{search}");
}

/// Bookmarks are "most recently bookmarked first": removing a bookmark and adding it again makes
/// it the most recent one; repeating a POST does not (it is the same bookmark).
#[tokio::test]
async fn a_bookmark_taken_back_and_made_again_is_the_most_recent() {
    let app = spawn_with_fixture().await;
    for article in ["art-1", "art-2", "art-3"] {
        app.post(&format!("/articles/{article}/bookmark"), "u")
            .await;
    }
    assert_eq!(
        ids(&app.get_json("/me/bookmarks", Some("u")).await),
        ["art-3", "art-2", "art-1"]
    );
    app.delete("/articles/art-1/bookmark", "u").await;
    app.post("/articles/art-1/bookmark", "u").await;
    assert_eq!(
        ids(&app.get_json("/me/bookmarks", Some("u")).await),
        ["art-1", "art-3", "art-2"]
    );
    app.delete("/articles/art-2/bookmark", "u").await;
    let page = app.get_json("/me/bookmarks", Some("u")).await;
    assert_eq!(ids(&page), ["art-1", "art-3"]);
    assert_eq!(page["data"][0]["bookmark_count"], 1);
}

/// Timestamps are "RFC 3339 in UTC with a `Z`", whatever offset the pipeline wrote them with.
#[tokio::test]
async fn published_at_is_utc_with_z_whatever_was_written() {
    let app = spawn_with_fixture().await;
    let pipeline = crate::helpers::pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id) \
         VALUES ('art-tz', 'Zoned', 'S', 'B', 'u', '2026-02-01T10:00:00.5+02:00', 'org-a', 'jrn-1')",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let article = app.get_json("/articles/art-tz", None).await;
    let published = article["published_at"].as_str().unwrap();
    assert!(
        published.starts_with("2026-02-01T08:00:00.5"),
        "{published}"
    );
    assert!(published.ends_with('Z'), "{published}");
}

/// "`errors` is present on 422 validation failures, one entry per bad field": a body whose shape
/// is wrong in one field and whose `text` is blank names both. The service judges the shape
/// first and answers only the shape errors (docs/conventions.md: "Fix the shape, and the next
/// answer names any bad values"), so a client fixing the named field meets a second 422.
#[tokio::test]
async fn a_shape_error_and_a_blank_text_are_named_together() {
    let app = spawn_with_fixture().await;
    let cases = [
        (
            json!({"article_id": "art-1", "text": "  ", "colour": "red"}),
            vec!["colour", "text"],
        ),
        (
            json!({"article_id": 5, "text": ""}),
            vec!["article_id", "text"],
        ),
        (
            json!({"article_id": "art-1", "text": "a".repeat(10_001), "parent_id": 3}),
            vec!["parent_id", "text"],
        ),
    ];
    for (body, expected) in cases {
        let problem = assert_problem(
            app.post_comment("u", &body, None).await,
            422,
            "validation_failed",
        )
        .await;
        assert_eq!(fields(&problem), expected, "{problem}");
    }
}
