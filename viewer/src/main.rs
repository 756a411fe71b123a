//! The viewer's entry point (trunk builds this binary for `wasm32-unknown-unknown`).

fn main() {
    speedmatrix_viewer::mount();
}
