//! `TaskStore` and `ConfirmationLedger` on Postgres (being written).

/// Applies the migrations in `migrations/postgres` to `url`.
///
/// # Errors
/// A user-safe description of what failed.
pub async fn migrate(_url: &str) -> Result<(), String> {
    Err("not yet available".into())
}
