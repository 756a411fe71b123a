//! show (in progress)
/// Run `show`.
pub fn run(_args: &crate::cli::ShowArgs) -> Result<(), crate::Error> {
    Ok(())
}
