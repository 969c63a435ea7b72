#!/usr/bin/env node
// Waits until a URL answers 2xx, so a service counts as started only once it serves: systemd's
// ExecStartPost= and the GPU-host image's entrypoint use it to start a GPU's vLLM servers one after another,
// each ready before the next loads (two loading at once race for the GPU's memory).
//
// examples/vllm-start.sh uses it the same way on a SkyPilot host.
//
// Usage: deploy/bin/wait-http.js [--pid PID] URL [TIMEOUT_SECONDS]   (default 600)
// Exit 0 when ready, 1 on timeout, 3 when process PID (the server being waited for) exited first.
'use strict';
/* global fetch, AbortSignal, setTimeout */

const fs = require('node:fs');

const args = process.argv.slice(2);
const pid = args[0] === '--pid' ? Number(args.splice(0, 2)[1]) : null;
const [url, timeoutArg = '600'] = args;
const timeoutS = Number(timeoutArg);
if (!url || !/^https?:\/\//.test(url) || !Number.isFinite(timeoutS) || timeoutS <= 0 || (pid !== null && !(pid > 0))) {
  process.stderr.write('usage: wait-http.js [--pid PID] URL [TIMEOUT_SECONDS]\n');
  process.exit(2);
}

/** True while `pid` runs. An exited child its parent has not reaped yet (a zombie, state Z) counts as gone. */
function isRunning(pid) {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

const deadline = Date.now() + timeoutS * 1000;
let last = 'no answer yet';

(async () => {
  for (;;) {
    if (pid !== null && !isRunning(pid)) process.exit(3);
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
