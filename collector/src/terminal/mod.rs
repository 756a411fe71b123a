//! What people read in a terminal: renderings of results files (pure `render_*` functions
//! returning strings; the commands only read files and print).
//!
//! - [`show`]: `speedmatrix show FILE` — header cards, prefill table, decode matrix (text,
//!   Markdown) or the full measurement table (CSV, JSON);
//! - [`compare`]: `speedmatrix diff A.json B.json` — header differences and the delta matrix
//!   (text, Markdown, JSON) and the regression gate.

pub mod compare;
pub mod show;
