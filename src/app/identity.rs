//! Who a request runs as.
//!
//! Token verification arrives with the identity issue (#4); until then every call runs as
//! the fixed local principal below, which holds every scope. Nothing about identity is
//! cached between requests.

use crate::domain::{DomainError, Principal, Scope, TenantId};

/// The tenant of the local principal (also the tenant `--dev` tokens will carry).
pub const LOCAL_TENANT: &str = "00000000-0000-4000-8000-000000000001";

/// Where the principal of a call comes from.
#[derive(Debug, Clone)]
pub enum Identity {
    /// Every call runs as one local principal with every scope.
    Local,
}

impl Identity {
    /// The principal of a call.
    ///
    /// # Errors
    /// `AuthzDenied` when no valid identity is available.
    pub fn principal(&self) -> Result<Principal, DomainError> {
        match self {
            Identity::Local => Ok(Principal {
                tenant: TenantId::parse(LOCAL_TENANT).expect("the local tenant id is a UUID"),
                actor: "local".into(),
                scopes: Scope::ALL.to_vec(),
            }),
        }
    }
}
