#!/usr/bin/env node
// Waits until a URL answers 2xx, so a service counts as started only once it serves: systemd's
// ExecStartPost= and the GPU-host image's entrypoint use it to start a GPU's vLLM servers one after another,
// each ready before the next loads (two loading at once race for the GPU's memory).
//
// Usage: deploy/bin/wait-http.js URL [TIMEOUT_SECONDS]   (default 600; exit 0 when ready, 1 on timeout)
'use strict';
/* global fetch, AbortSignal, setTimeout */

const [url, timeoutArg = '600'] = process.argv.slice(2);
const timeoutS = Number(timeoutArg);
if (!url || !/^https?:\/\//.test(url) || !Number.isFinite(timeoutS) || timeoutS <= 0) {
  process.stderr.write('usage: wait-http.js URL [TIMEOUT_SECONDS]\n');
  process.exit(2);
}

const deadline = Date.now() + timeoutS * 1000;
let last = 'no answer yet';

(async () => {
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      if (res.ok) process.exit(0);
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    if (Date.now() > deadline) {
      process.stderr.write(`${url} not ready after ${timeoutS} s (last: ${last})\n`);
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
})();
