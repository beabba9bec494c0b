//! The test harness itself: fresh databases with the system's roles and schemas.
#![allow(clippy::unwrap_used)]

use shared_auth::testing::TestDatabase;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

#[tokio::test]
async fn each_test_gets_its_own_database_with_roles_and_schemas() {
    let (first, second) = tokio::join!(TestDatabase::create(), TestDatabase::create());
    assert_ne!(first.name, second.name);

    let mut owner = PgConnection::connect(&first.url_for("lingo_owner"))
        .await
        .unwrap();
    sqlx::raw_sql("CREATE TABLE probe (id int)")
        .execute(&mut owner)
        .await
        .unwrap();
    let schema: String = sqlx::query_scalar(
        "SELECT table_schema::text FROM information_schema.tables WHERE table_name = 'probe'",
    )
    .fetch_one(&mut owner)
    .await
    .unwrap();
    assert_eq!(schema, "lingo", "the owner's search_path is its schema");

    // The other test's database does not see it.
    let mut other = PgConnection::connect(&second.url_for("lingo_owner"))
        .await
        .unwrap();
    let seen: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'probe'",
    )
    .fetch_one(&mut other)
    .await
    .unwrap();
    assert_eq!(seen, 0);
}

#[tokio::test]
async fn a_service_role_cannot_touch_the_other_schema() {
    let db = TestDatabase::create().await;
    let mut news_owner = PgConnection::connect(&db.url_for("news_owner"))
        .await
        .unwrap();
    sqlx::raw_sql("CREATE TABLE articles_probe (id int)")
        .execute(&mut news_owner)
        .await
        .unwrap();
    let mut lingo_app = PgConnection::connect(&db.url_for("lingo_app"))
        .await
        .unwrap();
    let error = sqlx::raw_sql("SELECT * FROM news.articles_probe")
        .execute(&mut lingo_app)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("permission denied"), "{error}");
    let error = sqlx::raw_sql("CREATE TABLE lingo.sneaky (id int)")
        .execute(&mut lingo_app)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("permission denied"), "{error}");
}
