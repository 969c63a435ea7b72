import { createHash } from 'node:crypto';

/**
 * The fleet page's one script: every `seconds` it fetches the page again (same URL, the browser's own
 * credentials, at most `seconds` to answer) and swaps in the new body, so an open page follows the fleet without
 * a reload (no flash, the scroll kept, nothing re-authenticated). A page that cannot be fetched is marked
 * `(stale)` in its title, and after three failures in a row reloaded, so the browser shows what the API answers
 * (an error, a sign-in) rather than an old picture. It runs nothing it fetched: a parsed document's scripts never
 * run, and the page's body has none. Without JavaScript a `<noscript>` meta refresh reloads the page instead
 * (api/ui/fleet-page.ts).
 */
export const liveScript = (seconds: number): string =>
  `(()=>{const every=${seconds * 1000};let failures=0;` +
  `const refresh=async()=>{try{const res=await fetch(location.href,{cache:'no-store',signal:AbortSignal.timeout(every)});` +
  `if(!res.ok)throw new Error(String(res.status));` +
  `const doc=new DOMParser().parseFromString(await res.text(),'text/html');` +
  `document.body.replaceWith(document.adoptNode(doc.body));document.title=doc.title;failures=0;}` +
  `catch(e){if(++failures>=3)return location.reload();` +
  `document.title='(stale) '+document.title.replace(/^\\(stale\\) /,'');}` +
  `setTimeout(refresh,every);};setTimeout(refresh,every);})();`;

/** The CSP source that lets exactly `script` run inline (`'sha256-…'`), and no other script. */
export const scriptHashSource = (script: string): string =>
  `'sha256-${createHash('sha256').update(script, 'utf8').digest('base64')}'`;
