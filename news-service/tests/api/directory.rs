//! The directory: `/organizations` and `/journalists`.

use serde_json::{Value, json};

use crate::helpers::{assert_problem, ids, spawn_with_fixture};

#[tokio::test]
async fn organizations_by_name_with_follower_counts_and_viewer() {
    let app = spawn_with_fixture().await;
    app.post("/organizations/org-b/follow", "u1").await;
    app.post("/organizations/org-b/follow", "u2").await;
    let page = app.get_json("/organizations", None).await;
    assert_eq!(ids(&page), ["org-a", "org-b", "org-c"]);
    assert_eq!(
        page["data"][1],
        json!({"id": "org-b", "name": "Beta Times", "url": "https://beta.example", "follower_count": 2, "viewer": null})
    );
    assert_eq!(
        (
            page["count"].clone(),
            page["limit"].clone(),
            page["offset"].clone(),
            page["next_offset"].clone()
        ),
        (json!(3), json!(20), json!(0), Value::Null)
    );
    let page = app.get_json("/organizations?limit=2", Some("u1")).await;
    assert_eq!(ids(&page), ["org-a", "org-b"]);
    assert_eq!(page["next_offset"], 2);
    assert_eq!(page["data"][0]["viewer"], json!({"following": false}));
    assert_eq!(page["data"][1]["viewer"], json!({"following": true}));
    assert_problem(
        app.get("/organizations?offset=-1", None).await,
        400,
        "invalid_query",
    )
    .await;
}

#[tokio::test]
async fn journalists_by_name_filtered_by_organization() {
    let app = spawn_with_fixture().await;
    app.post("/journalists/jrn-1/follow", "u1").await;
    let page = app.get_json("/journalists", None).await;
    assert_eq!(ids(&page), ["jrn-2", "jrn-3", "jrn-1"]); // Amy, Bob, Zed
    assert_eq!(
        page["data"][2],
        json!({"id": "jrn-1", "name": "Zed Writer", "organization_id": "org-a", "follower_count": 1, "viewer": null})
    );
    let page = app
        .get_json("/journalists?organization_id=org-a", Some("u1"))
        .await;
    assert_eq!(ids(&page), ["jrn-2", "jrn-1"]);
    assert_eq!(page["data"][1]["viewer"], json!({"following": true}));
    assert_eq!(
        app.get_json("/journalists?organization_id=nope", None)
            .await["count"],
        0
    );
}
