//! speedmatrix viewer — placeholder until the viewer issue builds the Leptos app.
//!
//! It already links the shared schema so that CI proves the schema crate and everything the
//! viewer will need from it compile for `wasm32-unknown-unknown`.

/// The schema version the viewer understands (the one `speedmatrix-schema` reads).
pub const SCHEMA_VERSION: u32 = speedmatrix_schema::SCHEMA_VERSION;
