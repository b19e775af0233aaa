//! The bridge with an audit log adapter of its own, served on stdio: it reports every call
//! on stderr and hands it on to the audit log the bridge's flags configure (the embedded
//! one, or `--memory-url`). Every other port and flag is the bridge's own.
//!
//! usage: cargo run --example custom_memory -- --dev --data-dir DIR

use std::sync::Arc;

use cyberos_mcp_bridge::domain::memory::NewAuditEntry;
use cyberos_mcp_bridge::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt};
use cyberos_mcp_bridge::{Bridge, CallCtx, DomainError, MemoryClient, async_trait};

type Result<T> = std::result::Result<T, DomainError>;

/// Reports each call of the log it wraps, with its tenant.
struct Reported(Arc<dyn MemoryClient>);

#[async_trait]
impl MemoryClient for Reported {
    async fn append(&self, ctx: &CallCtx, new: &NewAuditEntry, key: &str) -> Result<AuditReceipt> {
        let receipt = self.0.append(ctx, new, key).await?;
        eprintln!(
            "custom_memory: {} appended {}",
            ctx.tenant, receipt.audit_id
        );
        Ok(receipt)
    }

    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry> {
        eprintln!("custom_memory: {} read {audit_id}", ctx.tenant);
        self.0.get(ctx, audit_id).await
    }

    async fn list(&self, ctx: &CallCtx, query: &AuditQuery) -> Result<AuditPage> {
        let page = self.0.list(ctx, query).await?;
        eprintln!(
            "custom_memory: {} listed {}",
            ctx.tenant,
            page.entries.len()
        );
        Ok(page)
    }

    async fn check(&self) -> Result<()> {
        self.0.check().await
    }
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // `from_args` also answers `cuo-runner`, how the default CUO command starts this program.
    let builder = Bridge::from_args().await?.map_ports(|mut ports| {
        ports.memory = Arc::new(Reported(ports.memory));
        ports
    });
    Ok(builder.build().await?.serve_stdio().await?)
}
