/* global document, localStorage, location, fetch, TextDecoderStream, URLSearchParams, setInterval, setTimeout */
// The fleet page: plain JavaScript, no build step. Reads the same /v1 routes as the CLI, with the API token
// given once as `#token=…` (kept in this browser's localStorage) and the fleet as `?fleet=`.
'use strict';
(() => {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('token')) localStorage.setItem('haruToken', hash.get('token'));
  const token = localStorage.getItem('haruToken');
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const $ = (id) => document.getElementById(id);
  const text = (el, value) => {
    if (el.textContent !== value) el.textContent = value;
  };
  const get = async (path) => {
    const res = await fetch(path, { headers });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${res.status}`);
    return body;
  };
  let fleetRef = new URLSearchParams(location.search).get('fleet');

  function row(cells, className) {
    const tr = document.createElement('tr');
    if (className) tr.className = className;
    for (const c of cells) {
      const td = document.createElement('td');
      td.textContent = c === null || c === undefined ? '-' : String(c);
      tr.append(td);
    }
    return tr;
  }

  /** Milliseconds as `850ms`, `12.3s`, `4m05s` or `2h07m` (formatAge in core/monitor-look.ts). */
  function age(ms) {
    if (ms < 1000) return `${Math.round(ms)}ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`;
    const minutes = Math.floor(ms / 60000);
    if (minutes < 60) return `${minutes}m${String(Math.floor((ms % 60000) / 1000)).padStart(2, '0')}s`;
    return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
  }

  /** When the watcher last heard the domain, as the API computed it (`sighting`), STALE past the stale limit. */
  const heard = (s) => (s.ageMs === null ? 'never' : `${age(s.ageMs)} ago`) + (s.isStale ? ' STALE' : '');

  /** Each slot with its state as the host last reported it, or `unknown` once that report is not current. */
  const slots = (d) =>
    d.slots
      .map((s) => {
        const state = d.sighting.isReportCurrent ? s.state : 'unknown';
        return s.kind === 'inference'
          ? `gpu${s.gpuIndex}:${state}[${s.models.map((m) => m.name).join(',')}]`
          : `gpu${s.gpuIndex}:train:${state}`;
      })
      .join(' ');

  async function showFleet() {
    if (!fleetRef) fleetRef = (await get('/v1/fleets')).fleets[0]?.slug;
    if (!fleetRef) throw new Error('no fleet');
    const f = await get(`/v1/fleets/${encodeURIComponent(fleetRef)}`);
    text($('fleet'), f.slug);
    const active = f.domains.find((d) => d.id === f.activeDomainId);
    text($('active'), active ? active.slug : 'none');
    text($('revision'), String(f.routeRevision));
    text(
      $('pause'),
      f.autoFailoverPause ? `paused by ${f.autoFailoverPause.by}` : f.policy.autoFailover ? 'on' : 'off',
    );
    $('domains').replaceChildren(
      ...f.domains.map((d) =>
        row(
          [d.slug, d.id === f.activeDomainId ? 'active' : 'standby', d.state, heard(d.sighting), slots(d)],
          [d.id === f.activeDomainId ? 'active' : '', d.sighting.isReportCurrent ? '' : 'stale'].join(' ').trim(),
        ),
      ),
    );
    const op = f.inFlightOperation;
    if (!op) return text($('operation'), 'none');
    const detail = await get(`/v1/fleets/${encodeURIComponent(f.slug)}/operations/${op.id}`);
    const steps = detail.progress ? detail.progress.steps.map((s) => `${s.step}: ${s.status}`).join('\n') : '';
    text($('operation'), `${op.kind} ${op.id} (${op.state})\n${steps}`);
  }

  /** The event feed: the SSE stream of /events?follow=1, read with fetch so the token goes in a header. */
  async function followEvents() {
    const res = await fetch(`/v1/fleets/${encodeURIComponent(fleetRef)}/events?follow=1`, { headers });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        if (!data) continue;
        const e = JSON.parse(data.slice(6));
        $('events').prepend(`${e.createdAt}  ${e.type}  ${e.message}\n`);
      }
    }
  }

  const tick = () =>
    showFleet().then(
      () => text($('error'), ''),
      (err) => text($('error'), err.message),
    );
  tick().then(() => {
    setInterval(tick, 500);
    const follow = () =>
      followEvents()
        .catch(() => undefined)
        .finally(() => setTimeout(follow, 1000));
    if (fleetRef) follow();
  });
})();
