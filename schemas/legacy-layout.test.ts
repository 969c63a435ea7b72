import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fleetLayoutSchema } from './layout';
import { convertLegacyLayout, isLegacyLayout } from './legacy-layout';

const ROOT = path.resolve(__dirname, '..');
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- fixtures edited freely, as the JSON says them
const read = (file: string) => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8')) as Record<string, any>;
const original = () => read('test/fixtures/original/fleet.json');

/** The smallest layout of the original format: one domain on loopback, nothing optional. */
const minimal = () => ({
  slug: 'solo',
  domains: [
    {
      slug: 'only',
      placement: { cloud: 'aws', region: 'us-east-1', accelerator: 'A10G' },
      supervisorUrl: 'http://127.0.0.1:8701',
      slots: [{ kind: 'inference', gpuIndex: 0, models: [{ name: 'm', servingUrl: 'http://127.0.0.1:9001' }] }],
    },
  ],
});

function converted(input: unknown) {
  const result = convertLegacyLayout(input);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result;
}
function problems(input: unknown) {
  const result = convertLegacyLayout(input);
  if (result.ok) throw new Error('converted');
  return result.problems;
}

describe('convertLegacyLayout', () => {
  it("moves the fleet's fields into `fleet`, merges the accelerator, and says so", () => {
    const { document, changes } = converted(original());
    expect(document.fleet).toMatchObject({ slug: 'chat', displayName: 'Chat fleet', activeDomain: 'east' });
    expect(document.domains[0]).toMatchObject({
      slug: 'east',
      provider: 'static',
      placement: { cloud: 'aws', region: 'us-east-1', accelerators: 'L4:2' },
      servingBaseUrl: 'http://gpu-east.internal:9001',
    });
    expect(document.domains[1]!.placement).toEqual({
      cloud: 'gcp',
      region: 'us-central1',
      accelerators: 'L4:1',
      useSpot: true,
    });
    expect(document.domains[0]!.slots).toEqual(original().domains[0].slots);
    expect(document).not.toHaveProperty('$schema');
    expect(changes).toEqual(
      expect.arrayContaining([
        "dropped: $.$schema (it named the original's JSON Schema)",
        'renamed: $.slug -> $.fleet.slug',
        'renamed: $.activeDomainSlug -> $.fleet.activeDomain',
        expect.stringMatching(
          /^check: \$\.fleet\.activeDomain = "east" is where routing starts .*: make it the domain serving now/,
        ),
        'renamed: $.policy.switchActiveTimeoutMs -> $.fleet.policy.commitTimeoutMs',
        'merged: $.domains[0].placement.accelerator and acceleratorCount -> $.domains[0].placement.accelerators = "L4:2"',
        expect.stringMatching(/^not carried over: \$\.domains\[1\] \(west\) is a skypilot domain/),
      ]),
    );
  });

  it('keeps the values the file set and writes the original defaults where Haru differs: the fleet fails over as before', () => {
    const { document, changes } = converted(original());
    const policy = fleetLayoutSchema.parse(document).fleet.policy;
    expect(policy).toMatchObject({
      autoFailover: true,
      commitTimeoutMs: 15_000,
      heartbeatStaleMs: 30_000,
      degradedGraceMs: 60_000,
      trainingStopGraceMs: 30_000,
      stopTrainingTimeoutMs: 90_000,
      probeTimeoutMs: 60_000,
      verifyGpuTimeoutMs: 30_000,
      wakeTimeoutMs: 120_000,
      sleepTimeoutMs: 60_000,
      startTrainingTimeoutMs: 30_000,
      probe: { prompt: 'hello', maxTokens: 4 },
    });
    expect(changes).toContain(
      "filled: $.fleet.policy.heartbeatStaleMs = 30000, the original's default (Haru's is 5000)",
    );
    expect(changes).toContainEqual(
      expect.stringMatching(/^filled: \$\.fleet\.policy: keys the original did not have .*heartbeatIntervalMs/),
    );
    // Without a policy, auto-failover stays off, as the original's default had it.
    const bare = converted(minimal());
    expect(fleetLayoutSchema.parse(bare.document).fleet.policy).toMatchObject({
      autoFailover: false,
      probe: { prompt: 'ping' },
    });
    expect(bare.changes).toContain(
      "filled: $.fleet.policy.autoFailover = false, the original's default (Haru's is true)",
    );
  });

  it('fills the active domain the original could leave out with the first one that serves, and says to check it', () => {
    const layout = original();
    delete layout.activeDomainSlug;
    layout.domains.reverse();
    layout.domains[0].slots = layout.domains[0].slots.filter((s: { kind: string }) => s.kind === 'training');
    const { document, changes } = converted(layout);
    expect(document.fleet.activeDomain).toBe('east');
    expect(changes).toContainEqual(
      expect.stringMatching(/^filled: \$\.fleet\.activeDomain = "east", the first domain with an inference slot/),
    );
  });

  it('opts a plain-http supervisor off loopback into insecure, as the original ran it, and says to move to https', () => {
    const { document, changes } = converted(original());
    expect(document.domains.map((d) => d.supervisor)).toEqual([{ insecure: true }, { insecure: true }]);
    expect(changes).toContainEqual(
      expect.stringMatching(/^filled: \$\.domains\[0\]\.supervisor\.insecure = true: .*https/),
    );
    expect(converted(minimal()).document.domains[0]).not.toHaveProperty('supervisor');
  });

  it('refuses a domain without supervisorUrl, naming the field', () => {
    const layout = original();
    delete layout.domains[1].supervisorUrl;
    expect(problems(layout)).toEqual([
      { path: '$.domains[1].supervisorUrl', message: expect.stringMatching(/^domain "west" has no supervisorUrl: /) },
    ]);
  });

  it('refuses what the original refused, at its path in the original file', () => {
    const layout = original();
    layout.domains[0].superviorUrl = layout.domains[0].supervisorUrl;
    layout.domains[1].placement.cloud = 'azure';
    expect(problems(layout)).toEqual([
      { path: '$.domains[0].superviorUrl', message: 'unknown key' },
      { path: '$.domains[1].placement.cloud', message: expect.any(String) },
    ]);
  });

  it("names Haru's refusals at the field of the original file, and where Haru has it", () => {
    const layout = original();
    layout.policy.heartbeatStaleMs = 400;
    layout.domains[0].slots[0].models[0].servingUrl = 'http://169.254.169.254/';
    layout.domains[1].slots[0].models[1].name = 'chat-small';
    expect(problems(layout)).toEqual(
      expect.arrayContaining([
        {
          path: '$.policy.heartbeatStaleMs',
          message: expect.stringMatching(
            /greater than heartbeatIntervalMs \(\$\.fleet\.policy\.heartbeatStaleMs in Haru's format\)$/,
          ),
        },
        { path: '$.domains[0].slots[0].models[0].servingUrl', message: expect.stringMatching(/metadata address/) },
        { path: '$.domains[1].slots[0].models[1].name', message: expect.stringMatching(/duplicate model name/) },
      ]),
    );
  });

  it('tells the original format from Haru’s', () => {
    expect(isLegacyLayout(original())).toBe(true);
    expect(isLegacyLayout(minimal())).toBe(true);
    expect(isLegacyLayout(read('examples/dev.layout.json'))).toBe(false);
    expect(isLegacyLayout(read('test/fixtures/original/supervisor.json'))).toBe(false);
    expect(isLegacyLayout([original()])).toBe(false);
  });
});
