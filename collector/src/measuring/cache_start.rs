//! How a row or cell of prefix-share traffic began: its cache reset, or its prompts salted
//! (and why). Asked for by the session (`Session::cache_start`), used by the prefix module's
//! prompts and figures.

use speedmatrix_schema::CacheStart;

/// How a row or cell began: reset, or salted (and why).
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// Reset or salted.
    pub how: CacheStart,
    /// The reset asked for, or why none was possible.
    pub detail: String,
}

impl Start {
    /// The salt its prompts need (their first text): nothing after a reset, else `salt`.
    pub fn salt<'a>(&self, salt: &'a str) -> &'a str {
        match self.how {
            CacheStart::Reset => "",
            CacheStart::Salted => salt,
        }
    }
}

/// A reset's 2xx answer that says the reset did not happen, in words; `None` for any other
/// answer (an empty body, text, `{"success": true}`). vLLM answers `{"success": false}` with
/// HTTP 200 when it could not empty its prefix cache (blocks still held by running requests).
pub fn refused(status_ok_body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(status_ok_body.trim()).ok()?;
    (v.get("success")? == &serde_json::Value::Bool(false)).then(|| {
        let body = crate::text::excerpt(status_ok_body, 200);
        format!("answered HTTP 200 with {body}: the server says the reset did not happen")
    })
}

/// What a failed reset's answer asks of the server's launch, by engine: vLLM serves the reset
/// only with `VLLM_SERVER_DEV_MODE=1`; llama-server erases a slot only when started with
/// `--slot-save-path` (else it answers 501).
pub fn hint(kind: crate::measuring::engine::EngineKind) -> &'static str {
    match kind {
        crate::measuring::engine::EngineKind::Vllm => " (vLLM serves it with VLLM_SERVER_DEV_MODE=1)",
        crate::measuring::engine::EngineKind::LlamaCpp => {
            " (llama-server erases a slot only when started with --slot-save-path)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_false_answer_is_a_refused_reset() {
        assert_eq!(
            refused(r#"{"success": false}"#).as_deref(),
            Some(r#"answered HTTP 200 with {"success": false}: the server says the reset did not happen"#)
        );
        for done in ["", "Cache flushed.", r#"{"success": true}"#, "null", "[]"] {
            assert_eq!(refused(done), None, "{done}");
        }
    }
}
