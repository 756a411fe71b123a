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
