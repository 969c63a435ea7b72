import { createHash } from 'node:crypto';
import { liveScript, scriptHashSource } from './live-update';
import { PAGE_HEADERS } from '../routes/ui';
import { renderFleetIndex } from './fleet-page';

describe('liveScript', () => {
  it('is one expression that parses, fetching the page itself every given seconds', () => {
    const script = liveScript(5);
    // Parsed (not run): a syntax error would leave an open page frozen.
    expect(() => new Function(script)).not.toThrow();
    expect(script).toContain('const every=5000;');
    expect(script).toContain('fetch(location.href,');
    // It takes the fetched page's body and title, nothing else.
    expect(script).toContain('document.body.replaceWith(document.adoptNode(doc.body))');
    expect(script).not.toMatch(/eval|innerHTML|write\(/);
    // A fetch is given the interval to answer; a page that cannot be fetched says so, and reloads after three.
    expect(script).toContain('signal:AbortSignal.timeout(every)');
    expect(script).toContain("document.title='(stale) '");
    expect(script).toContain('if(++failures>=3)return location.reload();');
  });
});

describe('scriptHashSource', () => {
  it("is CSP's sha256 source of the script's UTF-8 text, base64", () => {
    const digest = createHash('sha256').update('alert(1)').digest('base64');
    expect(scriptHashSource('alert(1)')).toBe(`'sha256-${digest}'`);
    expect(scriptHashSource('alert(2)')).not.toBe(scriptHashSource('alert(1)'));
  });
});

describe("the fleet page's CSP", () => {
  it('lets exactly the script the page carries run, byte for byte, and fetch only from its own origin', () => {
    const doc = renderFleetIndex([], '2030-01-01T00:00:00.000Z');
    const scripts = [...doc.matchAll(/<script>([^<]*)<\/script>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(1);
    const csp = PAGE_HEADERS['content-security-policy'];
    expect(csp).toContain(`script-src ${scriptHashSource(scripts[0]!)};`);
    expect(csp).toContain("connect-src 'self';");
    expect(csp).toMatch(/^default-src 'none';/);
  });
});
