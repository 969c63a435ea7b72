import { clientResponseHeaders, upstreamRequestHeaders } from './headers';

describe('upstreamRequestHeaders', () => {
  it("keeps the client's own headers and drops its credentials, its forwarding claims, hop-by-hop and Haru's", () => {
    const sent = upstreamRequestHeaders({
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'openai-organization': 'org-1',
      authorization: 'Bearer haru-token',
      'x-api-key': 'haru-token',
      cookie: 'a=b',
      forwarded: 'for=10.0.0.1',
      'x-forwarded-for': '10.0.0.1',
      'x-forwarded-host': 'admin.internal',
      'x-forwarded-proto': 'https',
      'x-real-ip': '10.0.0.1',
      'x-haru-fleet': 'dev',
      connection: 'keep-alive, x-custom-hop',
      'x-custom-hop': '1',
      'content-length': '12',
      host: 'haru:8700',
    });
    expect(sent).toEqual({
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'openai-organization': 'org-1',
    });
  });
});

describe('clientResponseHeaders', () => {
  it("passes the upstream's headers back without cookies, hop-by-hop or X-Haru-*, then Haru's own", () => {
    const back = clientResponseHeaders(
      { 'content-type': 'application/json', 'set-cookie': ['a=b'], 'x-haru-domain': 'forged', connection: 'close' },
      { 'x-haru-domain': 'east' },
    );
    expect(back).toEqual({ 'content-type': 'application/json', 'x-haru-domain': 'east' });
  });
});
