/** Where the Temporal Web UI runs, and the namespace Haru's workflows live in. */
export interface TemporalUi {
  url: string;
  namespace: string;
}

/**
 * A workflow's page in the Temporal Web UI: `/namespaces/<ns>/workflows/<id>`, which the UI redirects to the
 * workflow's latest run (temporalio/ui src/routes/(app)/namespaces/[namespace]/workflows/[workflow]/+page.ts).
 * Haru's workflow ids hold slashes (`haru/<fleet>/op/<id>`): encoded, they stay one path segment. Pure.
 */
export function temporalWorkflowUrl(ui: TemporalUi, workflowId: string): string {
  const base = ui.url.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
