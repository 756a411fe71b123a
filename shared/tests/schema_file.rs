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
