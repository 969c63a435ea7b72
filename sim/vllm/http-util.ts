import type http from 'node:http';

/** Reads the whole request body as UTF-8. */
export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Sends JSON (or an empty body when `body` is undefined, as vLLM's admin endpoints answer). */
export function send(res: http.ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status, { 'content-length': '0' }).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** What uvicorn answers for an unhandled exception in a route. */
export function internalServerError(res: http.ServerResponse): void {
  res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error');
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
