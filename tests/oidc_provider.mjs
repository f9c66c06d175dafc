// A real OpenID Provider for the single sign-on tests: the certified `oidc-provider` package (tests/package.json),
// on 127.0.0.1:PORT, with the clients and people that SETTINGS (a JSON file) names.
//
//     node tests/oidc_provider.mjs PORT SETTINGS
//
// SETTINGS is {"clients": [...], "people": {"<sub>": {claims}}}. It is read again for every sign-in, so a test
// can change someone's groups between two sign-ins. The sign-in page stands in for the company's own: a form
// that takes whose sign-in it is (`login`, a sub) and how they proved it (`amr`, comma-separated), then gives
// consent for the scopes asked for. Prints "listening" once it accepts connections.
import fs from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const [port, settingsFile] = process.argv.slice(2);
const settings = () => JSON.parse(fs.readFileSync(settingsFile, 'utf8'));

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: settings().clients,
  async findAccount(ctx, sub) {
    const person = settings().people[sub];
    if (!person) return undefined;
    return { accountId: sub, async claims() { return { sub, ...person }; } };
  },
  claims: { openid: ['sub', 'amr', 'auth_time'], profile: ['preferred_username', 'name', 'groups'], email: ['email'] },
  pkce: { required: () => true },
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['petportal-test-provider'] },
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

const callback = provider.callback();
http.createServer((request, response) => {
  if (request.url.startsWith('/interaction/')) {
    interaction(request, response).catch((error) => {
      response.writeHead(400, { 'content-type': 'text/plain' });
      response.end(String(error));
    });
    return;
  }
  callback(request, response);
}).listen(Number(port), '127.0.0.1', () => console.log('listening'));
