/** One sample of the Prometheus text exposition format. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Parses Prometheus text exposition (what vLLM serves on /metrics) into samples. Comment and blank lines are
 * skipped; a line that is not a sample is skipped too, so an exotic line never hides the metrics we need.
 */
export function parsePrometheusText(text: string): PromSample[] {
  const samples: PromSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[3] ?? '').matchAll(LABEL)) {
      labels[key!] = value!.replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
    }
    const value = Number(match[4] === '+Inf' ? Infinity : match[4] === '-Inf' ? -Infinity : match[4]);
    samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/** Sum of every series of `name` that matches `labels`; null when there is no such series. */
export function sumSamples(samples: PromSample[], name: string, labels: Record<string, string> = {}): number | null {
  const matching = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (matching.length === 0) return null;
  return matching.reduce((sum, s) => sum + s.value, 0);
}
