//! Migrations: idempotent, recorded, and guarded against edits and newer schemas.

use fleetscope_store::schema::{latest_version, MIGRATIONS};
use fleetscope_store::StoreError;
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn migrations_are_idempotent_and_guarded() {
    let test = TestStore::start().await;
    // TestStore already migrated once: a second and a concurrent third run change nothing.
    let (second, third) = tokio::join!(test.store.migrate(), test.store.migrate());
    let all: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(second.unwrap().already_applied, all);
    assert_eq!(third.unwrap().already_applied, all);

    // A fresh database gets every migration applied.
    let fresh = test.other_database();
    let report = fresh.migrate().await.unwrap();
    assert_eq!(report.applied, all);
    assert!(report.already_applied.is_empty());

    // An applied migration whose text changed is refused, naming it.
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(fresh.database());
    client
        .query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (1, 'initial schema', 'edited', 0)")
        .execute()
        .await
        .unwrap();
    let err = fresh.migrate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::MigrationChanged { version: 1, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("migration 1 (initial schema) was changed"),
        "{err}"
    );

    // A database migrated by a newer build is refused rather than written with the wrong schema.
    let newer = test.other_database();
    newer.migrate().await.unwrap();
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(newer.database());
    client
        .query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (9999, 'future', 'x', 0)")
        .execute()
        .await
        .unwrap();
    let err = newer.migrate().await.unwrap_err().to_string();
    assert_eq!(
        err,
        format!("the database has migration 9999, newer than this build knows (latest {}); upgrade fleetscope", latest_version())
    );
}

#[test]
fn bad_database_names_and_urls_are_rejected() {
    use fleetscope_store::{Store, StoreConfig};
    let err = Store::connect(&StoreConfig::new(
        "http://127.0.0.1:8123",
        "fleet; DROP TABLE x",
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "database name \"fleet; DROP TABLE x\" is invalid: use 1 to 64 characters of a-z, 0-9 and '_', starting with a letter"
    );
    let err = Store::connect(&StoreConfig::new("localhost:8123", "fleet")).unwrap_err();
    assert_eq!(err.to_string(), "clickhouse url \"localhost:8123\" is invalid: expected http://host:port or https://host:port");
    assert!(Store::connect(&StoreConfig::new("http://127.0.0.1:8123/", "fleetscope")).is_ok());
}
