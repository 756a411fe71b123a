//! The committed JSON Schema (`shared/schema/results.schema.json`) must equal the one generated
//! from the Rust types. Regenerate with `SPEEDMATRIX_BLESS=1 cargo test -p speedmatrix-schema`.

use std::path::PathBuf;

#[test]
fn committed_json_schema_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/results.schema.json");
    let generated = format!("{:#}\n", speedmatrix_schema::json_schema());
    if std::env::var_os("SPEEDMATRIX_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the schema file");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale (or missing): the results types changed. Regenerate it with \
         `SPEEDMATRIX_BLESS=1 cargo test -p speedmatrix-schema --test schema_file` and commit it.",
        path.display()
    );
}

#[test]
fn schema_names_version_and_documents_units() {
    let schema = speedmatrix_schema::json_schema();
    let text = schema.to_string();
    assert_eq!(schema["title"], "Results");
    assert!(schema["required"].as_array().unwrap().iter().any(|v| v == "schema_version"));
    // Doc comments carry units into the schema, so a reader of the JSON Schema sees them.
    assert!(text.contains("tok/s") && text.contains("ms (client clock)"), "units missing from descriptions");
}

#[test]
fn migrated_seed_fixture_validates_against_the_committed_schema() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("shared/schema/results.schema.json")).unwrap())
            .unwrap();
    // The fixture is a round-1 (schema v1) file: the loader migrates it, and the migrated
    // document is what this build writes.
    let loaded = speedmatrix_schema::load_results(
        &std::fs::read(root.join("tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap(),
    )
    .expect("the seed fixture loads");
    let fixture = serde_json::to_value(&loaded).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the committed schema compiles");
    let errors: Vec<String> = validator.iter_errors(&fixture).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "fixture violates the JSON Schema: {errors:#?}");

    // And the schema rejects what the loader rejects by type: a string where a number belongs.
    let mut broken = fixture.clone();
    broken["decode"][0]["total_tps"] = serde_json::json!("fast");
    assert!(!validator.is_valid(&broken));
}
