import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Router } from 'express';
import type { RouteDoc } from '../route-doc';

const UI_DIR = path.join(__dirname, '..', 'ui');

/** The OpenAPI entries of the fleet page (api/openapi.ts). */
export const UI_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'get',
    path: '/ui',
    summary: 'The fleet page (plain HTML): its data comes from /v1 routes with the token given as `#token=`',
    tag: 'meta',
    scope: null,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
  },
  {
    method: 'get',
    path: '/ui/ui.js',
    summary: "The fleet page's script",
    tag: 'meta',
    scope: null,
    responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } },
  },
];

/**
 * `GET /ui` and `/ui/ui.js`: a static page, no data in it, so it is open like /openapi.json; everything it
 * shows it reads from /v1 behind the same bearer token as the CLI. Read once at start.
 */
export function uiRoutes(): Router {
  const html = readFileSync(path.join(UI_DIR, 'index.html'));
  const script = readFileSync(path.join(UI_DIR, 'ui.js'));
  const router = Router();
  router.get('/ui', (_req, res) => {
    res.type('html').send(html);
  });
  router.get('/ui/ui.js', (_req, res) => {
    res.type('text/javascript').send(script);
  });
  return router;
}
