import { z } from 'zod';
import { inputProblems } from './issues';
import { type FleetLayoutInput, fleetLayoutSchema } from './layout';
import { isRecord, type LegacyConversion, problemsInOriginal } from './legacy-conversion';
import { defaultFleetPolicy } from './policy';

// The fleet layout of the project Haru grew from (its `db:seed` input), as it accepted it: unknown keys refused,
// defaults left out so that what the file sets can be told from what it left to the defaults.

const ms = z.number().int().positive().optional();
const legacyPolicySchema = z.strictObject({
  autoFailover: z.boolean().optional(),
  heartbeatStaleMs: ms,
  degradedGraceMs: ms,
  trainingStopGraceMs: ms,
  stopTrainingTimeoutMs: ms,
  verifyGpuTimeoutMs: ms,
  wakeTimeoutMs: ms,
  probeTimeoutMs: ms,
  switchActiveTimeoutMs: ms,
  sleepTimeoutMs: ms,
  startTrainingTimeoutMs: ms,
  probe: z
    .strictObject({ prompt: z.string().min(1).optional(), maxTokens: z.number().int().positive().optional() })
    .optional(),
});
type LegacyPolicy = z.infer<typeof legacyPolicySchema>;

const legacySlotSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('inference'),
    gpuIndex: z.number().int().nonnegative(),
    models: z.array(z.strictObject({ name: z.string().min(1), servingUrl: z.string() })).min(1),
    sleepLevel: z.literal(1).optional(),
  }),
  z.strictObject({
    kind: z.literal('training'),
    gpuIndex: z.number().int().nonnegative(),
    command: z.array(z.string().min(1)).min(1),
    checkpointDir: z.string().min(1),
  }),
]);

const legacyDomainSchema = z.strictObject({
  slug: z.string(),
  provider: z.enum(['static', 'skypilot', 'skyserve']).optional(),
  placement: z.strictObject({
    cloud: z.enum(['aws', 'gcp']),
    region: z.string().min(1),
    accelerator: z.string().min(1),
    acceleratorCount: z.number().int().positive().optional(),
    useSpot: z.boolean().optional(),
  }),
  supervisorUrl: z.string().optional(),
  servingBaseUrl: z.string().optional(),
  slots: z.array(legacySlotSchema).min(1),
});

export const legacyLayoutSchema = z.strictObject({
  $schema: z.string().optional(),
  slug: z.string(),
  displayName: z.string().min(1).optional(),
  activeDomainSlug: z.string().optional(),
  policy: legacyPolicySchema.optional(),
  domains: z.array(legacyDomainSchema).min(1),
});
export type LegacyLayout = z.infer<typeof legacyLayoutSchema>;

/** The policy the original resolved for a key its layout left out. */
const ORIGINAL_POLICY_DEFAULTS = {
  autoFailover: false,
  heartbeatStaleMs: 30_000,
  degradedGraceMs: 60_000,
  trainingStopGraceMs: 30_000,
  stopTrainingTimeoutMs: 90_000,
  verifyGpuTimeoutMs: 30_000,
  wakeTimeoutMs: 120_000,
  probeTimeoutMs: 60_000,
  switchActiveTimeoutMs: 10_000,
  sleepTimeoutMs: 60_000,
  startTrainingTimeoutMs: 30_000,
} as const;
const ORIGINAL_PROBE_DEFAULTS = { prompt: 'ping', maxTokens: 4 } as const;
type OriginalPolicyKey = keyof typeof ORIGINAL_POLICY_DEFAULTS;

/** Policy keys of the original under another name in Haru. */
const RENAMED_POLICY_KEYS: Partial<Record<OriginalPolicyKey, string>> = { switchActiveTimeoutMs: 'commitTimeoutMs' };
const haruKeyOf = (key: OriginalPolicyKey): string => RENAMED_POLICY_KEYS[key] ?? key;

/** A file of the original layout format: the fleet's fields at the top, beside `domains`, and no `fleet` block. */
export const isLegacyLayout = (input: unknown): boolean =>
  isRecord(input) &&
  Array.isArray(input.domains) &&
  !('fleet' in input) &&
  ('slug' in input || 'activeDomainSlug' in input);

const show = (value: unknown) => JSON.stringify(value);

/**
 * Haru's policy for the original one: every value set is kept (under its Haru name); a key left out is written
 * with the original's default where Haru's differs, so the fleet fails over as it did (auto-failover stays off
 * unless the file turned it on).
 */
function convertPolicy(policy: LegacyPolicy, changes: string[]): Record<string, unknown> {
  const haru = defaultFleetPolicy() as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(ORIGINAL_POLICY_DEFAULTS) as OriginalPolicyKey[]) {
    const haruKey = haruKeyOf(key);
    const set = policy[key];
    if (set !== undefined) {
      out[haruKey] = set;
      if (haruKey !== key) changes.push(`renamed: $.policy.${key} -> $.fleet.policy.${haruKey}`);
    } else if (haru[haruKey] !== ORIGINAL_POLICY_DEFAULTS[key]) {
      out[haruKey] = ORIGINAL_POLICY_DEFAULTS[key];
      changes.push(
        `filled: $.fleet.policy.${haruKey} = ${show(out[haruKey])}, the original's default (Haru's is ${show(haru[haruKey])})`,
      );
    }
  }
  const haruProbe = haru.probe as Record<string, unknown>;
  const probe: Record<string, unknown> = {};
  for (const key of ['prompt', 'maxTokens'] as const) {
    const set = policy.probe?.[key];
    if (set !== undefined) probe[key] = set;
    else if (haruProbe[key] !== ORIGINAL_PROBE_DEFAULTS[key]) {
      probe[key] = ORIGINAL_PROBE_DEFAULTS[key];
      changes.push(
        `filled: $.fleet.policy.probe.${key} = ${show(probe[key])}, the original's default (Haru's is ${show(haruProbe[key])})`,
      );
    }
  }
  if (Object.keys(probe).length) out.probe = probe;
  const mapped = new Set<string>([
    ...Object.keys(ORIGINAL_POLICY_DEFAULTS).map((k) => haruKeyOf(k as OriginalPolicyKey)),
  ]);
  const haruOnly = Object.keys(haru).filter((key) => !mapped.has(key) && key !== 'probe');
  changes.push(
    `filled: $.fleet.policy: keys the original did not have take Haru's defaults (${haruOnly.join(', ')}, probe.fingerprint)`,
  );
  return out;
}

type LegacyDomain = LegacyLayout['domains'][number];

/** Plain http:// to a host other than this one (lib/loopback.ts's rule; schemas/ imports no project folder). */
function plainHttpOffLoopback(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const { protocol, hostname } = new URL(url);
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const loopback = host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
  return protocol === 'http:' && !loopback ? hostname : undefined;
}

/** Where a domain's fields go; a domain without a supervisor cannot be converted (Haru drives every domain through one). */
function convertDomain(domain: LegacyDomain, i: number, changes: string[]): Record<string, unknown> {
  const at = `$.domains[${i}]`;
  const { accelerator, acceleratorCount, useSpot, cloud, region } = domain.placement;
  const accelerators = `${accelerator}:${acceleratorCount ?? 1}`;
  changes.push(
    `merged: ${at}.placement.accelerator${acceleratorCount === undefined ? '' : ' and acceleratorCount'} -> ${at}.placement.accelerators = ${show(accelerators)}`,
  );
  if (domain.provider === 'skypilot' || domain.provider === 'skyserve') {
    changes.push(
      `not carried over: ${at} (${domain.slug}) is a ${domain.provider} domain: Haru launches one only when asked to provision it, from a "launch" block the original had no counterpart for (drivers/README.md); until you add one it is driven at supervisorUrl like a static host`,
    );
  }
  const plainHost = domain.supervisorUrl === undefined ? undefined : plainHttpOffLoopback(domain.supervisorUrl);
  if (plainHost) {
    changes.push(
      `filled: ${at}.supervisor.insecure = true: the original sent the supervisor token to ${plainHost} over plain http://, which Haru refuses without this opt-in; serve the supervisor over https (HARU_SUPERVISOR_TLS_CERT_FILE) and remove it`,
    );
  }
  return {
    slug: domain.slug,
    ...(domain.provider ? { provider: domain.provider } : {}),
    placement: { cloud, region, accelerators, ...(useSpot === undefined ? {} : { useSpot }) },
    supervisorUrl: domain.supervisorUrl,
    ...(plainHost ? { supervisor: { insecure: true } } : {}),
    ...(domain.servingBaseUrl ? { servingBaseUrl: domain.servingBaseUrl } : {}),
    slots: domain.slots,
  };
}

/** `$.fleet.activeDomain` and such, back to where the original file has the field. */
function originalPath(path: readonly PropertyKey[]): PropertyKey[] {
  const [top, key, ...rest] = path;
  if (top === 'fleet') {
    if (key === 'activeDomain') return ['activeDomainSlug', ...rest];
    if (key !== 'policy' || rest.length === 0) return key === undefined ? [] : [key, ...rest];
    const [policyKey, ...deeper] = rest;
    const renamed = Object.entries(RENAMED_POLICY_KEYS).find(([, haruKey]) => haruKey === policyKey)?.[0];
    return ['policy', renamed ?? policyKey!, ...deeper];
  }
  if (top === 'domains' && path[2] === 'placement' && path[3] === 'accelerators')
    return [...path.slice(0, 3), 'accelerator'];
  return [...path];
}

/**
 * Converts a layout of the original format to Haru's (docs/migration.md). The result is checked against Haru's
 * layout schema before it is returned, so a converted layout is one `haru db seed` accepts.
 */
export function convertLegacyLayout(input: unknown): LegacyConversion<FleetLayoutInput> {
  const parsed = legacyLayoutSchema.safeParse(input);
  if (!parsed.success) return { ok: false, problems: inputProblems(parsed.error) };
  const legacy = parsed.data;
  const missing = legacy.domains.flatMap((d, i) =>
    d.supervisorUrl === undefined
      ? [
          {
            path: `$.domains[${i}].supervisorUrl`,
            message: `domain "${d.slug}" has no supervisorUrl: Haru drives every domain through its supervisor, so the layout must name it`,
          },
        ]
      : [],
  );
  if (missing.length) return { ok: false, problems: missing };

  const changes: string[] = [];
  if (legacy.$schema !== undefined) changes.push("dropped: $.$schema (it named the original's JSON Schema)");
  changes.push('renamed: $.slug -> $.fleet.slug');
  if (legacy.displayName !== undefined) changes.push('renamed: $.displayName -> $.fleet.displayName');
  let activeDomain = legacy.activeDomainSlug;
  if (activeDomain !== undefined) changes.push('renamed: $.activeDomainSlug -> $.fleet.activeDomain');
  else {
    activeDomain = (legacy.domains.find((d) => d.slots.some((s) => s.kind === 'inference')) ?? legacy.domains[0]!).slug;
    changes.push(
      `filled: $.fleet.activeDomain = ${show(activeDomain)}, the first domain with an inference slot: the original could start a fleet with no active domain, Haru starts each with one`,
    );
  }
  // The original's activeDomainSlug only placed a new fleet; a failover since then moved its pointer elsewhere.
  changes.push(
    `check: $.fleet.activeDomain = ${show(activeDomain)} is where routing starts in a new Haru store: make it the domain serving now (a failover since the original seeded it moves it)`,
  );
  if (legacy.policy !== undefined) changes.push('moved: $.policy -> $.fleet.policy');
  const policy = convertPolicy(legacy.policy ?? {}, changes);
  const domains = legacy.domains.map((d, i) => convertDomain(d, i, changes));

  const document = {
    fleet: {
      slug: legacy.slug,
      ...(legacy.displayName === undefined ? {} : { displayName: legacy.displayName }),
      activeDomain,
      policy,
    },
    domains,
  } as FleetLayoutInput;
  const checked = fleetLayoutSchema.safeParse(document);
  if (!checked.success) return { ok: false, problems: problemsInOriginal(checked.error, originalPath) };
  return { ok: true, document, changes };
}
