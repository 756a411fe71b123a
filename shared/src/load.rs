//! Loading (in progress).
/// Errors from loading a results file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not JSON.
    #[error("{0}")]
    Json(String),
}
/// Load a results file.
pub fn load_results(bytes: &[u8]) -> Result<crate::Results, LoadError> {
    serde_json::from_slice(bytes).map_err(|e| LoadError::Json(e.to_string()))
}
