//! The approval page's sign-in: the OpenID Connect authorization code flow with PKCE at
//! the issuer the bridge already trusts (`--jwt-issuer`), as client `--approval-client-id`.
//!
//! The login's `state` is a one-time secret in the store, bound to the approval; its
//! payload is the PKCE verifier and the nonce the ID token must carry. The ID token's
//! `sub` and `tenant_id` are what the login proves.

use openidconnect::core::{CoreClient, CoreProviderMetadata, CoreResponseType};
use openidconnect::{
    AuthenticationFlow, AuthorizationCode, ClientId, ClientSecret, CsrfToken, HttpRequest,
    HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    TokenResponse,
};
use serde_json::{Value, json};

use super::page::{digest, page, store_down};
use crate::domain::TenantId;
use crate::domain::approval::{Approval, PageSecret, SECRET_LIFETIME_MS, SecretKind};
use crate::ports::{Approvals, Clock};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

/// How long a request to the identity provider may take.
const IDP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The sign-in's client at the identity provider.
pub struct OidcLogin {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    http: reqwest::Client,
    /// The provider's discovery document, fetched at the first login.
    provider: tokio::sync::OnceCell<CoreProviderMetadata>,
}

impl OidcLogin {
    /// A sign-in at `issuer` as `client_id` (with `client_secret` for a confidential
    /// client), redirecting back to `redirect`.
    ///
    /// # Errors
    /// A malformed issuer or redirect URL, or no HTTP client.
    pub fn new(
        issuer: &str,
        client_id: String,
        client_secret: Option<String>,
        redirect: String,
    ) -> anyhow::Result<OidcLogin> {
        let issuer = IssuerUrl::new(issuer.to_owned()).map_err(|e| {
            anyhow::anyhow!("--jwt-issuer is not a URL for the approval sign-in: {e}")
        })?;
        let redirect = RedirectUrl::new(redirect)
            .map_err(|e| anyhow::anyhow!("the approval page's callback URL is malformed: {e}"))?;
        // reqwest is built without a TLS provider of its own: rustls on ring, as the
        // bridge's other clients, installed here too since this client may be the first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // No redirects: a provider's endpoint that redirects is refused, not followed.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(IDP_TIMEOUT)
            .build()?;
        Ok(OidcLogin {
            issuer,
            client_id: ClientId::new(client_id),
            client_secret: client_secret.map(ClientSecret::new),
            redirect,
            http,
            provider: tokio::sync::OnceCell::new(),
        })
    }

    async fn provider(&self) -> Option<&CoreProviderMetadata> {
        let http = self.http.clone();
        let send = move |req: HttpRequest| send(http.clone(), req);
        self.provider
            .get_or_try_init(|| CoreProviderMetadata::discover_async(self.issuer.clone(), &send))
            .await
            .inspect_err(|e| tracing::warn!(error = %e, "the approval sign-in cannot discover the identity provider"))
            .ok()
    }

    /// Sends the person to the identity provider to sign in for `approval`.
    pub(super) async fn start(
        &self,
        approvals: &dyn Approvals,
        clock: &dyn Clock,
        approval: &Approval,
    ) -> Response {
        let Some(provider) = self.provider().await else {
            return unreachable_idp();
        };
        let client = CoreClient::from_provider_metadata(
            provider.clone(),
            self.client_id.clone(),
            self.client_secret.clone(),
        )
        .set_redirect_uri(self.redirect.clone());
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge)
            .url();
        let secret = PageSecret {
            kind: SecretKind::Login,
            digest: digest(state.secret()),
            approval: approval.id,
            tenant: approval.binding.tenant,
            subject: None,
            payload: json!({ "verifier": verifier.secret(), "nonce": nonce.secret() }).to_string(),
            expires_at: clock.now().plus_millis(SECRET_LIFETIME_MS),
        };
        if let Err(e) = approvals.keep_secret(&secret).await {
            return store_down(&e);
        }
        let mut resp = page(
            StatusCode::SEE_OTHER,
            "Sign in",
            "<p>Sign in at your identity provider to decide this call.</p>",
        );
        match HeaderValue::from_str(url.as_str()) {
            Ok(v) => {
                resp.headers_mut().insert(header::LOCATION, v);
                resp
            }
            Err(_) => unreachable_idp(),
        }
    }

    /// Finishes the login the callback's `query` answers: the approval it was for, and
    /// the tenant and subject its ID token proves. `None` when anything does not hold.
    pub(super) async fn finish(
        &self,
        approvals: &dyn Approvals,
        query: &str,
    ) -> Option<(Approval, TenantId, String)> {
        let (mut code, mut state) = (None, None);
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "code" if code.is_none() => code = Some(v.into_owned()),
                "state" if state.is_none() => state = Some(v.into_owned()),
                _ => {}
            }
        }
        // The state is taken first, so even a failed callback uses it up.
        let secret = approvals
            .take_secret(SecretKind::Login, &digest(&state?))
            .await
            .ok()??;
        let payload: Value = serde_json::from_str(&secret.payload).ok()?;
        let verifier = payload.get("verifier")?.as_str()?.to_owned();
        let nonce = Nonce::new(payload.get("nonce")?.as_str()?.to_owned());
        let provider = self.provider().await?;
        let client = CoreClient::from_provider_metadata(
            provider.clone(),
            self.client_id.clone(),
            self.client_secret.clone(),
        )
        .set_redirect_uri(self.redirect.clone());
        let http = self.http.clone();
        let send = move |req: HttpRequest| send(http.clone(), req);
        let tokens = client
            .exchange_code(AuthorizationCode::new(code?))
            .ok()?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier))
            .request_async(&send)
            .await
            .inspect_err(
                |e| tracing::warn!(error = %e, "the approval sign-in's code exchange failed"),
            )
            .ok()?;
        let id_token = tokens.id_token()?;
        let claims = id_token
            .claims(&client.id_token_verifier(), &nonce)
            .inspect_err(
                |e| tracing::warn!(error = %e, "the approval sign-in's ID token was refused"),
            )
            .ok()?;
        let subject = claims.subject().as_str().to_owned();
        let tenant = tenant_claim(&id_token.to_string())?;
        let approval = approvals.find(&secret.approval).await.ok()??;
        Some((approval, tenant, subject))
    }
}

/// The `tenant_id` claim of a (verified) JWT's payload.
fn tenant_claim(jwt: &str) -> Option<TenantId> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(payload.trim_end_matches('=').as_bytes())
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    TenantId::parse(claims.get("tenant_id")?.as_str()?).ok()
}

/// One request to the identity provider, through our client.
async fn send(http: reqwest::Client, req: HttpRequest) -> Result<HttpResponse, reqwest::Error> {
    let (parts, body) = req.into_parts();
    let resp = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.bytes().await?.to_vec();
    let mut out = HttpResponse::new(body);
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    Ok(out)
}

fn unreachable_idp() -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in unavailable",
        "<p>The bridge cannot reach the identity provider right now; try the link again in a moment.</p>",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_claim_is_read_from_the_payload() {
        let payload = data_encoding::BASE64URL_NOPAD
            .encode(br#"{"sub":"a","tenant_id":"00000000-0000-4000-8000-000000000001"}"#);
        let jwt = format!("h.{payload}.s");
        assert_eq!(
            tenant_claim(&jwt).map(|t| t.to_string()).as_deref(),
            Some("00000000-0000-4000-8000-000000000001")
        );
        assert_eq!(tenant_claim("h.e30.s"), None);
        assert_eq!(tenant_claim("nonsense"), None);
    }
}
