import { createHash } from 'node:crypto';

/**
 * The fleet page's one script: every `seconds` it fetches the page again (same URL, the browser's own
 * credentials) and swaps in the new body, so an open page follows the fleet without a reload (no flash, the
 * scroll kept, nothing re-authenticated). A failed fetch leaves the page as it was until the next try. It runs
 * nothing it fetched: a parsed document's scripts never run, and the page's body has none. Without JavaScript a
 * `<noscript>` meta refresh reloads the page instead (api/ui/fleet-page.ts).
 */
export const liveScript = (seconds: number): string =>
  `(()=>{const every=${seconds * 1000};` +
  `const refresh=async()=>{try{const res=await fetch(location.href,{cache:'no-store'});` +
  `if(res.ok){const doc=new DOMParser().parseFromString(await res.text(),'text/html');` +
  `document.body.replaceWith(document.adoptNode(doc.body));document.title=doc.title;}}catch(e){}` +
  `setTimeout(refresh,every);};setTimeout(refresh,every);})();`;

/** The CSP source that lets exactly `script` run inline (`'sha256-…'`), and no other script. */
export const scriptHashSource = (script: string): string =>
  `'sha256-${createHash('sha256').update(script, 'utf8').digest('base64')}'`;
