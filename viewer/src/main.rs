//! The viewer's entry point (scripts/build-viewer.sh builds this binary for `wasm32-unknown-unknown`).

fn main() {
    speedmatrix_viewer::mount();
}
