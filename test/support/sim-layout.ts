import path from 'node:path';
import type { FleetLayoutInput } from '../../schemas/layout';
import { SIM_TRAINER } from '../../sim/domain';
import { freePort } from './ports';

/**
 * A fleet of two simulated domains, east (active) and west, each with one GPU serving `model` and a training
 * slot running the fake trainer; every address on a free loopback port. `servingPath` is appended to each
 * serving URL (e.g. `/v1`).
 */
export async function twoDomainLayout(opts: {
  slug: string;
  model: string;
  stateDir: string;
  policy: FleetLayoutInput['fleet']['policy'];
  servingPath?: string;
}): Promise<FleetLayoutInput> {
  const domain = async (slug: string) => ({
    slug,
    supervisorUrl: `http://127.0.0.1:${await freePort()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: [{ name: opts.model, servingUrl: `http://127.0.0.1:${await freePort()}${opts.servingPath ?? ''}` }],
      },
      {
        kind: 'training' as const,
        gpuIndex: 0,
        command: ['node', SIM_TRAINER],
        checkpointDir: path.join(opts.stateDir, slug, 'checkpoints'),
      },
    ],
  });
  return {
    fleet: { slug: opts.slug, activeDomain: 'east', policy: opts.policy },
    domains: [await domain('east'), await domain('west')],
  };
}
