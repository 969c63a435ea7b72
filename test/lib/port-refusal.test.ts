/** lib/port-refusal.ts against real listeners (lib/ itself imports nothing but Node and lib/). */
import { closedPort, listenLocal, startSilentHost } from '../support/local-server';
import { isPortRefused } from '../../lib/port-refusal';

describe('isPortRefused', () => {
  it('is true for a port nothing listens on', async () => {
    expect(await isPortRefused(`http://127.0.0.1:${await closedPort()}/v1`, 1_000)).toBe(true);
  });

  it('is false for a port something listens on', async () => {
    const server = await listenLocal((_req, res) => res.end());
    try {
      expect(await isPortRefused(`${server.url}/v1`, 1_000)).toBe(false);
    } finally {
      await server.close();
    }
  });

  it('is false for a host whose packets vanish: silence proves nothing', async () => {
    const silent = await startSilentHost();
    try {
      expect(await isPortRefused(silent.url, 200)).toBe(false);
    } finally {
      await silent.close();
    }
  });

  it('is false for an address it cannot parse', async () => {
    expect(await isPortRefused('not a url', 200)).toBe(false);
  });
});
