/**
 * HTML built by one tagged template that escapes every value put into it: a name, a reason or an error message
 * from the store can never become markup. Only `SafeHtml` (what `html` itself returned) goes in unescaped.
 */

/** Markup `html` produced: inserted as it is. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** What a template slot takes: text (escaped), markup, lists of either; null, undefined and false print nothing. */
export type HtmlPart = SafeHtml | string | number | null | undefined | false | readonly HtmlPart[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML text or an attribute value (quoted with `"` or `'`). */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);

function render(part: HtmlPart): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof SafeHtml) return part.value;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** The template: its literal parts as written, every `${value}` escaped unless it is SafeHtml. */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlPart[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new SafeHtml(out);
}
