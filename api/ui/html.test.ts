import { escapeHtml, html, SafeHtml } from './html';

/** Markup without the whitespace between tags (the formatter lays templates out over lines). */
const tight = (markup: SafeHtml) => markup.value.replace(/>\s+|\s+</g, (m) => m.trim());

describe('html', () => {
  it('escapes every value put into it, in text and in attributes', () => {
    const name = `<script>alert("x")</script>' onmouseover='y' &`;
    const out = html`<p title="${name}">${name}</p>`.value;
    expect(out).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &amp;">' +
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &amp;</p>',
    );
    expect(out).not.toContain('<script');
  });

  it('inserts markup it made itself as it is, lists joined, and nothing for null, undefined and false', () => {
    const item = (s: string) => html`<li>${s}</li>`;
    expect(
      tight(
        html`<ul>
          ${['a<b', 'c'].map(item)}${null}${undefined}${false}${0}
        </ul>`,
      ),
    ).toBe('<ul><li>a&lt;b</li><li>c</li>0</ul>');
    expect(html`${new SafeHtml('<b>ours</b>')}`.value).toBe('<b>ours</b>');
  });

  it('escapes the five characters that end text or an attribute', () => {
    expect(escapeHtml(`&<>"'`)).toBe('&amp;&lt;&gt;&quot;&#39;');
  });
});
