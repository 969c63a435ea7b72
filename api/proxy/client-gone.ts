/**
 * What the proxy path needs of an abort signal: whether it fired, and a listener called once when it does.
 * An `AbortSignal` is one; the proxy's own requests use `ClientGone`.
 */
export interface AbortLike {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Set once when a proxied request's client goes away; the forwarder and a hold listen to it. An
 * `AbortController` costs an `EventTarget` with its listener map and validation per request on the hot
 * path; this is one object and, while something listens, one array. Listeners run once, in the order
 * they were added; one added after the abort is never called (as with `AbortSignal`: check `aborted` first).
 */
export class ClientGone implements AbortLike {
  aborted = false;
  private listeners: (() => void)[] | null = null;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = null;
    if (listeners) for (const listener of listeners) listener();
  }

  addEventListener(_type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners ? this.listeners.indexOf(listener) : -1;
    if (i >= 0) this.listeners!.splice(i, 1);
  }
}
