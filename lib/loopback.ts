/**
 * True for addresses that only this host can reach: `localhost`, 127.0.0.0/8 and `::1` (bracketed, as a URL's
 * hostname writes it, or bare).
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

/** Whether `url` is plain http:// to a host off loopback: what it carries (a bearer token) crosses a network readable. */
export function isPlainHttpOffLoopback(url: string): boolean {
  const parsed = new URL(url);
  return parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname);
}
