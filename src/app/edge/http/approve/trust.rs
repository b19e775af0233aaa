//! Who the approval page takes the person to be, and how it finds out.

use std::sync::Arc;

use super::login::OidcLogin;
use crate::domain::TenantId;

/// Who the page takes the person to be, and how it finds out.
#[derive(Clone)]
pub enum PageTrust {
    /// No way to prove who is there: the page says to use the terminal command.
    None,
    /// `--dev` on loopback: the local dev subject, without a login.
    Dev {
        /// The dev token's tenant.
        tenant: TenantId,
        /// The dev token's subject.
        subject: String,
    },
    /// An OpenID Connect login at the operator's identity provider.
    Oidc(Arc<OidcLogin>),
}

impl std::fmt::Debug for PageTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageTrust::None => "PageTrust::None",
            PageTrust::Dev { .. } => "PageTrust::Dev",
            PageTrust::Oidc(_) => "PageTrust::Oidc",
        })
    }
}
