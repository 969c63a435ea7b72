import type { DomainRow } from './domain-rows';
import type { FleetPage, Warning } from './fleet-page-view';
import { html, SafeHtml } from './html';
import type { OperationRow } from './operation-rows';
import { liveScript } from './live-update';
import { PAGE_STYLE } from './page-style';

/** How often the page shows the fleet anew (its script, or a meta refresh without JavaScript). */
export const REFRESH_SECONDS = 5;

/** The page's one script (api/ui/live-update.ts); the route's CSP allows it by hash and nothing else. */
export const PAGE_SCRIPT = liveScript(REFRESH_SECONDS);
// Outside the page's template, byte for byte: a formatter must not touch the text the CSP hash is taken of.
const SCRIPT_ELEMENT = `<script>${PAGE_SCRIPT}</script>`;

/** A whole page: no external asset, updated in place every REFRESH_SECONDS (reloaded without JavaScript). */
function page(title: string, body: SafeHtml): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <noscript><meta http-equiv="refresh" content="${REFRESH_SECONDS}" /></noscript>
        <title>${title}</title>
        <style>
          ${new SafeHtml(PAGE_STYLE)}
        </style>
        ${new SafeHtml(SCRIPT_ELEMENT)}
      </head>
      <body>
        ${body}
      </body>
    </html> `.value;
}

const alerts = (warnings: readonly Warning[], allClear: string) =>
  warnings.length
    ? warnings.map((w) => html`<p class="alert ${w.level}" role="alert">${w.text}</p>`)
    : html`<p class="all-clear">${allClear}</p>`;

function domainRow(d: DomainRow): SafeHtml {
  const health = [
    d.consecutiveFailures > 0 ? `${d.consecutiveFailures} missed polls` : '',
    d.lastError && (d.state === 'failed' || d.consecutiveFailures > 0) ? `last error: ${d.lastError}` : '',
  ].filter(Boolean);
  return html`<tr class="tone-${d.tone}" data-domain="${d.slug}" data-role="${d.role}">
    <th scope="row">${d.slug}</th>
    <td class="role tone-${d.tone}">${d.role}</td>
    <td>${d.state}${health.length > 0 && html`<br /><small>${health.join('; ')}</small>`}</td>
    <td>${d.heard}${d.isStale && html` <span class="stale">STALE</span>`}</td>
    <td>
      ${
        d.models.length
          ? html`<ul>
              ${d.models.map((m) => html`<li>${m.name} <span class="m-${m.state}">${m.state}</span> <small>GPU ${m.gpuIndex}</small></li>`)}
            </ul>`
          : 'none'
      }
    </td>
    <td>
      ${
        d.training.length
          ? html`<ul>
              ${d.training.map((t) => html`<li>GPU ${t.gpuIndex}: ${t.state}</li>`)}
            </ul>`
          : 'none'
      }
    </td>
    <td>
      ${
        d.gpuMemory
          ? html`<ul>
              ${d.gpuMemory.map((g) => html`<li>${g}</li>`)}
            </ul>`
          : 'unknown'
      }
    </td>
    <td>${d.takeover ? d.takeover.text : '— (the active)'}</td>
  </tr>`;
}

function operation(op: OperationRow): SafeHtml {
  const steps = op.steps
    ? html`<ol class="steps">
        ${op.steps.map(
          (s) =>
            html`<li class="tone-${s.tone}" data-step="${s.name}">
              ${s.name}:
              <span class="outcome tone-${s.tone}">${s.status}</span
              >${s.duration && html` <span class="dur">${s.duration}</span>`}${s.note && html` <small>(${s.note})</small>`}
            </li>`,
        )}
      </ol>`
    : html`<p><small>Steps unknown: the workflow did not answer.</small></p>`;
  return html`<li class="op tone-${op.tone}" data-operation="${op.id}">
    <p>
      <b>${op.kind}</b> → ${op.target}${op.from && op.from !== op.target && html` (from ${op.from})`} ·
      <span class="outcome tone-${op.tone}">${op.outcomeText}</span> · requested ${op.age} · duration ${op.duration}
    </p>
    <p>
      <small
        >by ${op.requestedBy} · reason: ${op.reason} · workflow
        ${
          op.workflowUrl
            ? html`<a href="${op.workflowUrl}" rel="noreferrer"><code>${op.workflowId}</code></a>`
            : html`<code>${op.workflowId}</code>`
        }</small
      >
    </p>
    ${op.error && html`<p class="op-error">${op.outcome === 'succeeded' ? 'not demoted' : 'error'}: ${op.error}</p>`}
    ${steps}
  </li>`;
}

/** The fleet page (`fleetPage`) as a document. */
export function renderFleetPage(p: FleetPage): string {
  const critical = p.warnings.filter((w) => w.level === 'critical').length;
  const body = html`<header>
      <h1>Fleet ${p.slug}${p.displayName !== p.slug && html`<span class="sub">${p.displayName}</span>`}</h1>
      <p class="facts">
        <span>serving <b id="active">${p.active ?? 'nothing'}</b></span>
        <span>route revision ${p.routeRevision}</span>
        <span class="tone-${p.autoFailover.tone}" id="auto-failover">auto-failover ${p.autoFailover.text}</span>
        <span class="tone-${p.monitor.tone}" id="monitor">monitor: ${p.monitor.text}</span>
        ${p.held && html`<span id="held">held requests: ${p.held}</span>`}
      </p>
      <p class="asof">
        As of ${p.at.slice(11, 19)} UTC, refreshed every ${REFRESH_SECONDS} s · <a href="/ui">all fleets</a>
      </p>
    </header>
    <section id="warnings">
      ${alerts(p.warnings, 'Nothing needs you: the active answers, a standby is ready, auto-failover is on.')}
    </section>
    ${
      p.lastFailed &&
      html`<section id="last-failed">
        <h2>Last failed operation</h2>
        <ol class="ops">
          ${operation(p.lastFailed)}
        </ol>
      </section>`
    }
    <section id="domains">
      <h2>Domains</h2>
      <table>
        <thead>
          <tr>
            <th>domain</th>
            <th>role</th>
            <th>state</th>
            <th>last heard</th>
            <th>models</th>
            <th>training</th>
            <th>GPU memory</th>
            <th>can take over</th>
          </tr>
        </thead>
        <tbody>
          ${p.domains.map(domainRow)}
        </tbody>
      </table>
    </section>
    <section id="operations">
      <h2>Recent operations</h2>
      ${
        p.operations.length
          ? html`<ol class="ops">
              ${p.operations.map(operation)}
            </ol>`
          : html`<p>None yet.</p>`
      }
    </section>`;
  return page(`${critical ? `(${critical}) ` : ''}${p.slug} · haru`, body);
}

/** The list of fleets a key may see, each with its active and its warnings. */
export function renderFleetIndex(
  fleets: readonly { slug: string; active: string | null; warnings: Warning[] }[],
  at: string,
): string {
  const body = html`<h1>Fleets</h1>
    <p class="asof">As of ${at.slice(11, 19)} UTC, refreshed every ${REFRESH_SECONDS} s</p>
    ${fleets.length === 0 && html`<p>No fleet.</p>`}
    ${fleets.map(
      (f) =>
        html`<section data-fleet="${f.slug}">
          <h2><a href="/ui/fleets/${encodeURIComponent(f.slug)}">${f.slug}</a>: serving ${f.active ?? 'nothing'}</h2>
          ${alerts(f.warnings, 'Nothing needs you.')}
        </section>`,
    )}`;
  return page('fleets · haru', body);
}
