// An OpenID provider for the SSO tests (tests/it/sso.rs): node-oidc-provider, OpenID Certified,
// on 127.0.0.1:PORT with the clients and accounts of STATE_FILE (JSON).
//
//   node provider.mjs PORT STATE_FILE
//
// STATE_FILE: {"clients": [...client metadata...], "accounts": {"<login>": {"email", "name",
// "groups"}}, "tamper": null}. Accounts and "tamper" are read again on every request, so a test
// changes a user's groups, or what the provider does wrong, by rewriting the file.
//
// The provider is strict as shipped (PKCE required, codes used once, exact redirect URIs). The
// only thing added is "tamper": the token endpoint's id_token re-signed with one claim wrong,
// for the relying party's checks a correct provider never exercises: "aud" (another client),
// "expired", "nonce", "issuer", "signature" (signed by a key the provider does not publish).
// Sign-in uses the provider's development interactions (login by account name, no password);
// consent is granted up front for the test's clients.
import Provider from 'oidc-provider';
import { SignJWT, decodeJwt, exportJWK, generateKeyPair } from 'jose';
import { readFileSync } from 'node:fs';

const [port, stateFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const state = () => JSON.parse(readFileSync(stateFile, 'utf8'));

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const { privateKey: unpublished } = await generateKeyPair('RS256');
const kid = 'svc-test';
const jwk = { ...(await exportJWK(privateKey)), kid, use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: state().clients,
  jwks: { keys: [jwk] },
  cookies: { keys: ['svc sso tests only'] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const account = state().accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: account.email, email_verified: true, name: account.name, groups: account.groups };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const grant = await ctx.oidc.provider.Grant.find(grantId);
      if (grant) return grant;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.use(async (ctx, next) => {
  await next();
  const mode = state().tamper;
  if (ctx.path !== '/token' || !mode || !ctx.body?.id_token) return;
  const claims = decodeJwt(ctx.body.id_token);
  const now = Math.floor(Date.now() / 1000);
  let key = privateKey;
  if (mode === 'aud') claims.aud = 'another-client';
  if (mode === 'expired') Object.assign(claims, { iat: now - 7200, exp: now - 3600 });
  if (mode === 'nonce') claims.nonce = 'not-the-nonce-of-this-sign-in';
  if (mode === 'issuer') claims.iss = 'http://127.0.0.1:1';
  if (mode === 'signature') key = unpublished;
  const idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' }).sign(key);
  ctx.body = { ...ctx.body, id_token: idToken };
});

provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc provider listening on ${issuer}`));
