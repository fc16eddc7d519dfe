// A certified OpenID Connect provider (the npm package oidc-provider) for the hub's sign-in
// tests, configured from a JSON file:
//
//   node provider.mjs <config.json>
//
// config: {
//   "module":   path of the installed oidc-provider package (its directory),
//   "port":     port to listen on (127.0.0.1),
//   "keysFile": where the private signing keys are kept; created with one new EC P-256 key
//               when missing, so that a restart on the same file keeps the keys and a restart
//               after deleting it rotates them,
//   "idTokenSeconds", "accessTokenSeconds": token lifetimes,
//   "clients":  [{ "client_id", "client_secret", "redirect_uris", "post_logout_redirect_uris",
//                  "grant_types", "groups" (for client_credentials tokens),
//                  "token_endpoint_auth_method" ("none" for a public client) }],
//   "accounts": { "<login>": ["group", ...] },
//   "resources": { "<resource indicator>": "<audience>" },
//   "shortResources": { "<resource indicator>": seconds }   (access tokens that expire soon)
// }
//
// People sign in through the package's development login form (any password), also for the
// device authorization grant (its /device page); their groups are the claim `groups` of the
// ID token. A client of the client_credentials grant gets a
// JWT access token for a resource, its audience the resource's, with the client's groups.

import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { default: Provider } = await import(
  pathToFileURL(join(config.module, 'lib', 'index.js')).href
);

if (!existsSync(config.keysFile)) {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  writeFileSync(
    config.keysFile,
    JSON.stringify({ keys: [{ ...jwk, kid: randomUUID(), alg: 'ES256', use: 'sig' }] }),
  );
}
const jwks = JSON.parse(readFileSync(config.keysFile, 'utf8'));

const issuer = `http://127.0.0.1:${config.port}`;
const clientGroups = Object.fromEntries(
  config.clients.map((client) => [client.client_id, client.groups ?? []]),
);
const clients = config.clients.map(({ groups, ...client }) => ({
  response_types: client.grant_types?.includes('authorization_code') ? ['code'] : [],
  token_endpoint_auth_method: 'client_secret_basic',
  id_token_signed_response_alg: 'ES256',
  ...client,
}));

const provider = new Provider(issuer, {
  clients,
  jwks,
  claims: {
    openid: ['sub'],
    email: ['email'],
    profile: ['preferred_username'],
    groups: ['groups'],
  },
  // The scopes' claims go into the ID token itself, as the hub reads them there.
  conformIdTokenClaims: false,
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          email: `${id}@example.test`,
          groups: config.accounts[id] ?? [],
        };
      },
    };
  },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    deviceFlow: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => false,
      getResourceServerInfo(_ctx, resource) {
        const audience = config.resources[resource];
        if (!audience) throw new Provider.errors.InvalidTarget();
        return {
          audience,
          accessTokenFormat: 'jwt',
          accessTokenTTL: config.shortResources?.[resource] ?? config.accessTokenSeconds,
          scope: 'fleet',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  async extraTokenClaims(_ctx, token) {
    if (token.kind === 'ClientCredentials') {
      return { groups: clientGroups[token.clientId] ?? [] };
    }
    return undefined;
  },
  ttl: {
    IdToken: config.idTokenSeconds,
    AccessToken: config.accessTokenSeconds,
    // A resource's own lifetime first (the short-lived resource's).
    ClientCredentials: (_ctx, token) =>
      token.resourceServer?.accessTokenTTL ?? config.accessTokenSeconds,
  },
  pkce: { required: () => true },
});
provider.proxy = false;

provider.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
