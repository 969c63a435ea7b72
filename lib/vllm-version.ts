/** The first vLLM release whose `/sleep` reads `mode` (vllm-project/vllm#34528, merged 2026-02-13). */
export const SLEEP_MODE_MIN_VERSION = [0, 17, 0] as const;

/**
 * Whether the vLLM of `version` (its `GET /version`) honours `POST /sleep?mode=wait`. Older servers read only
 * `level` and silently ignore `mode` (they abort), so only the version can tell; an unreadable or unparseable
 * version counts as too old. Pre-releases, dev and local builds (`0.17.0rc1`, `0.17.0.dev5`, `0.17.1+cu128`)
 * count by their release numbers.
 */
export function supportsSleepWaitMode(version: string | null): boolean {
  const match = version ? /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim()) : null;
  if (!match) return false;
  const have = [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
  for (let i = 0; i < 3; i += 1) {
    if (have[i]! !== SLEEP_MODE_MIN_VERSION[i]) return have[i]! > SLEEP_MODE_MIN_VERSION[i]!;
  }
  return true;
}
