import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '../..');

/**
 * A bare forwarder in one Node process: reads the body, sends it upstream on a keep-alive undici Agent
 * (dispatch interface) and writes the answer back chunk by chunk. No routing, auth, validation or metrics:
 * what any single-process Node proxy pays at least.
 */
const BARE_FORWARDER = `
const http = require('node:http');
const { Agent, util } = require('undici');
const [origin, port] = process.argv.slice(1);
const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);
http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    agent.dispatch(
      { origin, path: req.url, method: req.method, headers: { 'content-type': req.headers['content-type'] }, body: Buffer.concat(chunks) },
      {
        onConnect() {},
        onHeaders(status, raw) {
          const h = util.parseHeaders(raw);
          for (const k of HOP) delete h[k];
          res.writeHead(status, h);
          return true;
        },
        onData(c) { res.write(c); return true; },
        onComplete() { res.end(); },
        onError() { res.destroy(); },
      },
    );
  });
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\\n'));
`;

/**
 * Starts the bare forwarder on `port` in front of `upstreamOrigin` (`http://127.0.0.1:PORT`). The caller
 * waits for it to answer and kills it.
 */
export function startBareForwarder(upstreamOrigin: string, port: number): ChildProcess {
  return spawn(process.execPath, ['-e', BARE_FORWARDER, upstreamOrigin, String(port)], {
    cwd: REPO_ROOT, // undici resolves from this checkout's node_modules
    stdio: 'ignore',
  });
}
