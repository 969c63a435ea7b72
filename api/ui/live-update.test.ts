import { createHash } from 'node:crypto';
import { liveScript, scriptHashSource } from './live-update';

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
  });
});

describe('scriptHashSource', () => {
  it("is CSP's sha256 source of the script's UTF-8 text, base64", () => {
    const digest = createHash('sha256').update('alert(1)').digest('base64');
    expect(scriptHashSource('alert(1)')).toBe(`'sha256-${digest}'`);
    expect(scriptHashSource('alert(2)')).not.toBe(scriptHashSource('alert(1)'));
  });
});
