import type { FleetLayoutInput } from '../schemas/layout';
import type { FleetPolicyInput } from '../schemas/policy';

/** Options of the test layout builder: fleet slug, domain slugs (first is active unless `active`), policy. */
export interface TestLayoutOptions {
  fleet?: string;
  domains?: string[];
  active?: string;
  policy?: FleetPolicyInput;
}

/**
 * A valid layout for tests: each domain has GPU 0 with an inference slot (one model `m-<domain>`) and a
 * training slot. URLs point at closed loopback ports: a connect to them is refused.
 */
export function testLayout(opts: TestLayoutOptions = {}): FleetLayoutInput {
  const domainSlugs = opts.domains ?? ['east', 'west'];
  return {
    fleet: {
      slug: opts.fleet ?? 'test',
      activeDomain: opts.active ?? domainSlugs[0]!,
      ...(opts.policy ? { policy: opts.policy } : {}),
    },
    domains: domainSlugs.map((slug, i) => ({
      slug,
      supervisorUrl: `http://127.0.0.1:${9 + i}/`,
      slots: [
        {
          kind: 'inference' as const,
          gpuIndex: 0,
          models: [{ name: 'm-shared', servingUrl: `http://127.0.0.1:${9 + i}/v1` }],
        },
        { kind: 'training' as const, gpuIndex: 0, command: ['node', 'train.js'], checkpointDir: `/tmp/ckpt/${slug}` },
      ],
    })),
  };
}
