//! The prompts of a trace replay (docs/METHODOLOGY.md, "Trace replay"): every hash id of the
//! trace maps to one block of text of [`BLOCK_TOKENS`] tokens, generated once from the
//! project's prose corpus and sized with the server's own tokenizer, so requests that share
//! ids share those tokens exactly (the same text, in the same order); the rest of a request's
//! input length is the start of its next id's block (a partial last block) or text of its own.
//!
//! A block's text is ` [block ID · run RUN] ` and prose seeded by the id, closed with short
//! words to exactly [`BLOCK_TOKENS`] tokens as the server counts them after a fixed anchor
//! (so the count is the block's in the middle of a prompt). A request's prompt is its whole
//! blocks, then the tail, sized as a whole prompt to `input_length` (chat: template included);
//! a replay whose cache could not be reset starts every prompt with its salt.

use crate::measuring::client::HttpError;
use crate::measuring::prompt::{prose, Prompt, PromptBuilder};
use speedmatrix_schema::trace::{prompt_plan, TraceEntry, BLOCK_TOKENS};
use std::collections::HashMap;

/// What each block is counted after: a block's tokens are those it adds to this text.
const ANCHOR: &str = "Notes.";

/// Builds a trace's prompts, each block once.
pub struct TracePrompts<'a> {
    builder: &'a PromptBuilder,
    /// Each id's block as words (joined with spaces, after a space).
    blocks: HashMap<u64, Vec<String>>,
    /// Tokens of [`ANCHOR`] alone.
    anchor: Option<u64>,
    /// A block whose count was not exactly [`BLOCK_TOKENS`] (calibrated sizer, or the search
    /// could not close it): how many.
    pub inexact_blocks: usize,
    /// Text before every prompt: empty, or the salt of a replay whose cache could not be reset.
    salt: String,
}

/// ` w1 w2 …`: words after a space each.
fn lead(words: &[String]) -> String {
    words.iter().fold(String::new(), |mut s, w| {
        s.push(' ');
        s.push_str(w);
        s
    })
}

impl<'a> TracePrompts<'a> {
    /// No block built yet; every prompt starts with `salt` (empty after a cache reset).
    pub fn new(builder: &'a PromptBuilder, salt: &str) -> TracePrompts<'a> {
        TracePrompts { builder, blocks: HashMap::new(), anchor: None, inexact_blocks: 0, salt: salt.to_string() }
    }

    /// Distinct blocks built so far.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// The words of block `id`, built on first use.
    async fn block(&mut self, id: u64) -> Result<Vec<String>, HttpError> {
        if let Some(b) = self.blocks.get(&id) {
            return Ok(b.clone());
        }
        let anchor = match self.anchor {
            Some(a) => a,
            None => {
                let a = self.builder.count(ANCHOR).await?.0;
                self.anchor = Some(a);
                a
            }
        };
        let mut words: Vec<String> =
            vec!["[block".into(), id.to_string(), "·".into(), "run".into(), format!("{}]", self.builder.run_id)];
        let seed = self.builder.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x7261_6365;
        words.extend(prose(seed, BLOCK_TOKENS as usize * 12 / 10 + 64));
        let text_of = |k: usize| format!("{ANCHOR}{}", lead(&words[..k]));
        let fitted = self.builder.fit(&text_of, words.len(), anchor + BLOCK_TOKENS).await?;
        if fitted.tokens != Some(anchor + BLOCK_TOKENS) {
            self.inexact_blocks += 1;
        }
        let block: Vec<String> =
            fitted.text[ANCHOR.len()..].split(' ').filter(|w| !w.is_empty()).map(str::to_string).collect();
        self.blocks.insert(id, block.clone());
        Ok(block)
    }

    /// The prompt of trace request `e`: its whole blocks, then the start of its next block or
    /// its own text, `input_length` tokens in all where the server can tell.
    ///
    /// # Errors
    /// When `/tokenize` fails.
    pub async fn prompt(&mut self, e: &TraceEntry) -> Result<Prompt, HttpError> {
        let plan = prompt_plan(e);
        let mut head = self.salt.clone();
        for id in &plan.full {
            head.push_str(&lead(&self.block(*id).await?));
        }
        let tail: Vec<String> = match plan.partial {
            Some((id, _)) => self.block(id).await?,
            None if plan.unique_tokens > 0 => {
                let mut w: Vec<String> = vec![
                    "[request".into(),
                    e.line.to_string(),
                    "·".into(),
                    "run".into(),
                    format!("{}]", self.builder.run_id),
                ];
                let seed = self.builder.seed ^ e.line.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ 0x7461_696c;
                w.extend(prose(seed, plan.unique_tokens as usize * 12 / 10 + 64));
                w
            }
            None => vec![],
        };
        let text_of = |k: usize| format!("{head}{}", lead(&tail[..k]));
        self.builder.fit(&text_of, tail.len(), e.input_length).await
    }
}
