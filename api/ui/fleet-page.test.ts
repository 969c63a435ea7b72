import { domainSnapshot } from '../../core/fleet-fixtures';
import { ago, ID, pageInput, progress, promotion, snapshot, step } from '../../test/support/fleet-page-fixtures';
import { PAGE_SCRIPT, renderFleetIndex, renderFleetPage } from './fleet-page';
import { fleetPage, fleetSummary } from './fleet-page-view';
import { temporalWorkflowUrl } from './temporal-link';

const HOSTILE = `<img src=x onerror="alert(1)"><script>alert('x')</script>`;
const ESCAPED = '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;';

/** Every start tag in `doc`, by name. */
const tags = (doc: string) => [...doc.matchAll(/<([a-z0-9]+)[\s>]/gi)].map(([, name]) => name!.toLowerCase());

describe('renderFleetPage', () => {
  it('prints hostile names, reasons and errors as text: no tag or attribute of theirs gets in', () => {
    const fleet = snapshot({
      displayName: HOSTILE,
      autoFailoverPause: { by: HOSTILE, reason: HOSTILE, at: ago(1_000) },
      domains: [
        domainSnapshot('a', { lastError: HOSTILE, consecutiveFailures: 2 }),
        domainSnapshot('b', {
          slots: domainSnapshot('b').slots.map((s) =>
            s.kind === 'inference' ? { ...s, models: [{ name: HOSTILE, servingUrl: 'http://x/v1' }] } : s,
          ),
        }),
      ],
    });
    const failed = promotion({
      state: 'failed',
      reason: HOSTILE,
      requestedBy: HOSTILE,
      error: { step: HOSTILE, code: HOSTILE, message: HOSTILE },
    });
    const doc = renderFleetPage(
      fleetPage(
        pageInput({
          fleet,
          operations: [failed],
          progress: new Map([[ID.op, progress([step({ step: HOSTILE, lastError: HOSTILE, status: 'failed' })])]]),
        }),
      ),
    );
    expect(new Set(tags(doc))).not.toContain('img');
    // The page's own script alone.
    expect(tags(doc).filter((t) => t === 'script')).toHaveLength(1);
    expect(doc).toContain(`<script>${PAGE_SCRIPT}</script>`);
    expect(doc).not.toMatch(/onerror="/);
    // displayName, the pause (by, reason), lastError, the model, the failed operation (reason, by, error's three
    // parts) twice (last failed and in the list), its step (name, error) twice.
    expect(doc.split(ESCAPED).length - 1).toBeGreaterThanOrEqual(15);
  });

  it('is one document with its own script alone and no external asset, reloaded without JavaScript', () => {
    const doc = renderFleetPage(fleetPage(pageInput({ operations: [promotion()] })));
    expect(doc).toMatch(/^<!doctype html>/);
    expect(doc).toMatch(/<noscript><meta http-equiv="refresh" content="5" \/><\/noscript>/);
    expect([...doc.matchAll(/<script>([^<]*)<\/script>/g)].map((m) => m[1])).toEqual([PAGE_SCRIPT]);
    expect(tags(doc)).not.toContain('link');
    expect(doc).not.toMatch(/\bsrc=|url\(|@import/);
  });

  it('puts the warnings first, counts the critical ones in the title, and labels the dead old active failed', () => {
    const fleet = snapshot({
      activeDomainId: ID.b,
      domains: [
        domainSnapshot('a', { state: 'failed', isActive: false, lastSeenAt: ago(40_000) }),
        domainSnapshot('b', { isActive: true }),
      ],
    });
    const doc = renderFleetPage(fleetPage(pageInput({ fleet })));
    expect(doc).toContain('<title>(1) prod · haru</title>');
    const warning = doc.indexOf('No standby ready: auto-failover could not move traffic');
    expect(warning).toBeGreaterThan(0);
    expect(warning).toBeLessThan(doc.indexOf('<table>'));
    expect(doc).toMatch(
      /<tr class="tone-bad" data-domain="a" data-role="failed">\s*<th scope="row">a<\/th>\s*<td class="role tone-bad">failed<\/td>/,
    );
    expect(doc).toContain('40 s ago <span class="stale">STALE</span>');
  });

  it('says so when nothing needs anyone', () => {
    const doc = renderFleetPage(fleetPage(pageInput({ monitor: null })));
    expect(doc).not.toContain('Nothing needs you');
    const healthy = fleetPage(pageInput());
    expect(renderFleetPage({ ...healthy, warnings: [] })).toContain('Nothing needs you');
  });
});

describe('renderFleetIndex', () => {
  it('links each fleet to its page by its escaped slug, with its warnings', () => {
    const summary = fleetSummary(snapshot({ slug: 'a&b' }), new Date());
    const doc = renderFleetIndex([summary], '2030-01-01T00:00:00.000Z');
    expect(doc).toContain('<a href="/ui/fleets/a%26b">a&amp;b</a>');
  });
});

describe('the workflow links', () => {
  it("links each operation's workflow to the Temporal Web UI when the API knows where it runs, and only then", () => {
    const op = promotion();
    const ui = { url: 'http://127.0.0.1:8233', namespace: 'default' };
    const linked = renderFleetPage(fleetPage({ ...pageInput({ operations: [op] }), temporalUi: ui }));
    expect(linked).toContain(
      `<a href="${temporalWorkflowUrl(ui, op.workflowId)}" rel="noreferrer"><code>${op.workflowId}</code></a>`,
    );
    const bare = renderFleetPage(fleetPage(pageInput({ operations: [op] })));
    expect(bare).toContain(`<code>${op.workflowId}</code>`);
    expect(bare).not.toContain('/namespaces/');
  });
});
