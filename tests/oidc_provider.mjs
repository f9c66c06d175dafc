// A real OpenID Provider for the single sign-on tests: the certified `oidc-provider` package (tests/package.json),
// on 127.0.0.1:PORT, with the clients and people that SETTINGS (a JSON file) names.
//
//     node tests/oidc_provider.mjs PORT SETTINGS
//
// SETTINGS is {"clients": [...], "people": {"<sub>": {claims}}, "jwks": {"keys": [its signing key]}}. It is read again for every sign-in, so a test
// can change someone's groups between two sign-ins. The sign-in page stands in for the company's own: a form
// that takes whose sign-in it is (`login`, a sub) and how they proved it (`amr`, comma-separated), then gives
// consent for the scopes asked for. Prints "listening" once it accepts connections.
//
// Back-Channel Logout is on. `POST /backchannel-logout` (form: `sub`, `to`, and `client_id`, the portal's by
// default) makes the provider send that client the logout token for `sub`, as it does when the person's session
// ends, to the address `to` (the client's `backchannel_logout_uri`, named per test since the portal's port is);
// it answers 204 when the client answered 200, else 502 with the error.
//
// `GET /jwks-requests` answers how many times its keys (`/jwks`) were asked for; `jwks_delay` in SETTINGS (seconds)
// makes it that slow to answer them.
import fs from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const [port, settingsFile] = process.argv.slice(2);
const settings = () => JSON.parse(fs.readFileSync(settingsFile, 'utf8'));

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: settings().clients,
  jwks: settings().jwks, // the key it signs with, which the tests know too
  async findAccount(ctx, sub) {
    const person = settings().people[sub];
    if (!person) return undefined;
    return { accountId: sub, async claims() { return { sub, ...person }; } };
  },
  claims: { openid: ['sub', 'amr', 'auth_time'], profile: ['preferred_username', 'name', 'groups'], email: ['email'] },
  pkce: { required: () => true },
  features: { devInteractions: { enabled: false }, backchannelLogout: { enabled: true } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['petportal-test-provider'] },
  // Its guard against requests to special-use addresses (SSRF) is left out: the portal it calls back listens on
  // 127.0.0.1 in the tests.
  fetch: (url, { dispatcher, ...options }) => globalThis.fetch(url, options),
});

function body(request) {
  return new Promise((resolve, reject) => {
    let text = '';
    request.on('data', (chunk) => { text += chunk; });
    request.on('end', () => resolve(new URLSearchParams(text)));
    request.on('error', reject);
  });
}

async function interaction(request, response) {
  const details = await provider.interactionDetails(request, response);
  if (request.method === 'GET') {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<form method="post" action="/interaction/${details.uid}/login">`
      + '<input name="login"><input name="amr"><button>Sign in</button></form>');
    return;
  }
  const form = await body(request);
  const accountId = form.get('login');
  const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
  grant.addOIDCScope(details.params.scope);
  const grantId = await grant.save();
  const amr = (form.get('amr') || 'pwd').split(',').filter(Boolean);
  await provider.interactionFinished(request, response, { login: { accountId, amr }, consent: { grantId } });
}

async function backchannelLogout(request, response) {
  const form = await body(request);
  const client = await provider.Client.find(form.get('client_id') || 'portal');
  client.backchannelLogoutUri = form.get('to');
  await client.backchannelLogout(form.get('sub'), undefined);
  response.writeHead(204);
  response.end();
}

const callback = provider.callback();
let jwksRequests = 0;
http.createServer(async (request, response) => {
  if (request.url === '/jwks-requests') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(String(jwksRequests));
    return;
  }
  if (request.url === '/jwks') {
    jwksRequests += 1;
    await new Promise((resolve) => { setTimeout(resolve, (settings().jwks_delay || 0) * 1000); });
  }
  if (request.url.startsWith('/interaction/')) {
    interaction(request, response).catch((error) => {
      response.writeHead(400, { 'content-type': 'text/plain' });
      response.end(String(error));
    });
    return;
  }
  if (request.url === '/backchannel-logout' && request.method === 'POST') {
    backchannelLogout(request, response).catch((error) => {
      response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(`${error}${error.cause ? ` (${error.cause})` : ''}`);
    });
    return;
  }
  callback(request, response);
}).listen(Number(port), '127.0.0.1', () => console.log('listening'));
