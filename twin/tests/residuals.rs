//! The residual table of the seed fit: every prefill row and decode cell of the seed run,
//! replayed on the `h200-qwen3.5-122b` profile in simulated time and measured the way the seed
//! measured it (`speedmatrix_twin::replay`). Pure and fast: no sockets, no real time.
//! `cargo test -p speedmatrix-twin --test residuals -- --nocapture` prints the table, as does
//! `speedmatrix simulate --profile h200-qwen3.5-122b --residuals`.

use speedmatrix_schema::{load_results, CellStatus};
use speedmatrix_twin::profile::SEED_RESULTS;
use speedmatrix_twin::replay::{residuals, ReplayStatus};
use speedmatrix_twin::Profile;

#[test]
fn residuals_of_the_seed_fit() {
    let seed = load_results(SEED_RESULTS.as_bytes()).unwrap();
    let r = residuals(&Profile::h200_qwen(), &seed, &[1, 2, 3]);
    println!("{r}");
}
