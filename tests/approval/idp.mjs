// A real OpenID Provider (oidc-provider) on 127.0.0.1 for the approval page's sign-in:
// a confidential client (client_secret_basic) and a public one (no secret), PKCE required
// of both, each with one bridge's /approve/callback as its redirect URI, and a sign-in
// page of its own (a user name and an
// organization picker, no password) in place of the library's dev interactions. The
// organization picked at a sign-in becomes that login's `tenant_id` claim in the ID token,
// as an identity provider with organizations does.
import http from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';

export const CLIENT_ID = 'cyberos-approval';
export const PUBLIC_CLIENT_ID = 'cyberos-approval-public';

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

/**
 * Starts the provider on 127.0.0.1:`port` for a bridge whose callback is `redirectUri`
 * (the confidential client) and one whose callback is `publicRedirectUri` (the public
 * client), offering `tenants` ({label: uuid}) at sign-in. Returns its issuer, the
 * confidential client's secret, what it logged (`errors`; `issued`: the claims of the ID
 * tokens it issued) and close().
 */
export async function startIdp({ port, redirectUri, publicRedirectUri, tenants }) {
  const issuer = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(24).toString('hex');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'approval-test', alg: 'RS256', use: 'sig' };
  // The organization each login picked, by the grant that login made.
  const tenantOfGrant = new Map();
  const errors = [];
  const issued = [];

  const provider = new Provider(issuer, {
    clients: [{
      client_id: CLIENT_ID,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      response_types: ['code'],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }, {
      client_id: PUBLIC_CLIENT_ID,
      redirect_uris: [publicRedirectUri],
      response_types: ['code'],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
    }],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    claims: { openid: ['sub', 'tenant_id'] },
    // Scope claims go into the ID token (the bridge reads no userinfo).
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    ttl: { AccessToken: 60, AuthorizationCode: 60, Grant: 600, IdToken: 60, Interaction: 600, Session: 600 },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, sub, token) {
      const tenant = token?.grantId ? tenantOfGrant.get(token.grantId) : undefined;
      return {
        accountId: sub,
        async claims() {
          return tenant ? { sub, tenant_id: tenant } : { sub };
        },
      };
    },
    async renderError(ctx, out) {
      errors.push(out);
      ctx.type = 'html';
      ctx.body = `<!doctype html><title>IdP error</title><h1>IdP error</h1><pre>${escape(JSON.stringify(out))}</pre>`;
    },
  });
  provider.on('server_error', (ctx, err) => errors.push({ server_error: String(err) }));
  provider.on('grant.error', (ctx, err) => errors.push({ grant_error: String(err) }));
  provider.on('authorization.error', (ctx, err) => errors.push({ authorization_error: String(err) }));
  provider.on('grant.success', (ctx) => {
    const idToken = ctx.body?.id_token;
    if (idToken) issued.push(JSON.parse(Buffer.from(idToken.split('.')[1], 'base64url')));
  });

  const oidc = provider.callback();
  const options = Object.entries(tenants)
    .map(([label, id]) => `<option value="${escape(id)}">${escape(label)} (${escape(id)})</option>`)
    .join('');

  async function interaction(req, res, uid) {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) throw new Error('interaction mismatch');
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>Sign in · Test IdP</title></head><body>
<h1>Sign in</h1><p>Test identity provider; client <code>${escape(details.params.client_id)}</code>.</p>
<form method="post" action="/interaction/${escape(uid)}">
<label>User <input name="login" autocomplete="off"></label>
<label>Organization <select name="tenant">${options}</select></label>
<button type="submit">Sign in</button></form></body></html>`);
      return;
    }
    const form = await readForm(req);
    const login = form.get('login') ?? '';
    const tenant = form.get('tenant') ?? '';
    if (!login || !Object.values(tenants).includes(tenant)) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('a user and one of the organizations');
      return;
    }
    const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
    grant.addOIDCScope('openid');
    const grantId = await grant.save();
    tenantOfGrant.set(grantId, tenant);
    await provider.interactionFinished(
      req, res,
      { login: { accountId: login }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  const server = http.createServer((req, res) => {
    const m = /^\/interaction\/([A-Za-z0-9_-]+)$/.exec(req.url ?? '');
    if (!m) return oidc(req, res);
    interaction(req, res, m[1]).catch((err) => {
      errors.push({ interaction: String(err) });
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`sign-in failed: ${err.message}`);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    issuer,
    clientSecret,
    errors,
    issued,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
