//! The results site: building it, writing it, serving it.
//!
//! - [`publish`]: `speedmatrix publish RUN.json… --out SITE/` — the site model built in memory
//!   (the embedded viewer, `runs/`, `runs/index.json`) and written in one place;
//! - [`serve`]: `speedmatrix serve [SITE/ | RUN.json…]` — a site folder, or runs published in
//!   memory, on 127.0.0.1;
//! - [`live_page`]: the live page — `run --serve` (this run, off the measuring path) and `serve
//!   --watch RUN.json` (a file another process writes), `/live.json` by conditional polling;
//! - [`single_file`]: `speedmatrix report RUN.json [B.json] -o report.html` — one self-contained HTML
//!   file (the viewer and the runs inlined) that opens from `file://`;
//! - [`demo`]: `speedmatrix demo` — the twin, a short run, publish and serve, about a minute.

pub mod demo;
pub mod live_page;
pub mod publish;
pub mod serve;
pub mod single_file;
