//! Who is calling: scopes, the verified principal, and the per-call context sent upstream.

use crate::domain::{TenantId, TraceId};

/// An OAuth scope the bridge knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Read personas, workflows, routes.
    CuoRead,
    /// Run workflows.
    CuoExecute,
    /// Read the audit log.
    MemoryRead,
    /// Append to the audit log.
    MemoryWrite,
    /// List skills.
    SkillRead,
    /// Run skills.
    SkillInvoke,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 6] = [
        Scope::CuoRead,
        Scope::CuoExecute,
        Scope::MemoryRead,
        Scope::MemoryWrite,
        Scope::SkillRead,
        Scope::SkillInvoke,
    ];

    /// The wire form, e.g. `cyberos:cuo:read`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::CuoRead => "cyberos:cuo:read",
            Scope::CuoExecute => "cyberos:cuo:execute",
            Scope::MemoryRead => "cyberos:memory:read",
            Scope::MemoryWrite => "cyberos:memory:write",
            Scope::SkillRead => "cyberos:skill:read",
            Scope::SkillInvoke => "cyberos:skill:invoke",
        }
    }

    /// Parses a known scope; unknown scopes are ignored by callers.
    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|sc| sc.as_str() == s)
    }
}

/// A verified caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant, from the verified token only.
    pub tenant: TenantId,
    /// The actor (`sub`).
    pub actor: String,
    /// The scopes the token grants that the bridge knows.
    pub scopes: Vec<Scope>,
}

impl Principal {
    /// Whether the principal holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// What every upstream call carries: the tenant, the actor and the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCtx {
    /// The caller's tenant.
    pub tenant: TenantId,
    /// The caller (`sub`).
    pub actor: String,
    /// The request's trace id.
    pub trace_id: TraceId,
    /// The span id of the caller's span, for `traceparent`.
    pub span_id: [u8; 8],
}

impl CallCtx {
    /// The W3C `traceparent` header value for this call.
    pub fn traceparent(&self) -> String {
        let span: String = self.span_id.iter().map(|b| format!("{b:02x}")).collect();
        format!("00-{}-{span}-01", self.trace_id)
    }
}
