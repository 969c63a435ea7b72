import type { ServerOptions } from 'node:http';

/**
 * How long a client may take to send a request's head (its line and headers) to any of Haru's listeners: a
 * real client sends it in one packet, so 10 s is generous. Node's own default is 60 s, checked every 30 s, so
 * thousands of connections trickling a byte of their head at a time were held 60-90 s each. Past it the
 * connection gets 408 and is closed. The body and the response are not bounded here: a stream may run long.
 */
export const HEAD_TIMEOUT_MS = 10_000;

/**
 * The options every Haru HTTP(S) listener is created with (`http.createServer(listenerLimits(), handler)`):
 * the head timeout, and the server checking for it every second instead of every 30 s. Over TLS the head's clock
 * starts only once the handshake is done, so the handshake gets the same bound (Node's own is 120 s); a plain
 * HTTP listener ignores it.
 */
export const listenerLimits = (headTimeoutMs = HEAD_TIMEOUT_MS): ServerOptions & { handshakeTimeout: number } => ({
  headersTimeout: headTimeoutMs,
  connectionsCheckingInterval: Math.min(1_000, headTimeoutMs),
  handshakeTimeout: headTimeoutMs,
});
