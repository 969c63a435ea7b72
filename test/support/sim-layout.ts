import path from 'node:path';
import type { FleetLayoutInput } from '../../schemas/layout';
import { SIM_TRAINER } from '../../sim/domain';
import { freePort } from './ports';

/**
 * A fleet of two simulated domains, east (active) and west, each with one GPU serving `model` and a training
 * slot running the fake trainer (none with `withTraining: false`); every address on a free loopback port
 * (from `port`, default `freePort`). `servingPath` is appended to each serving URL (e.g. `/v1`).
 */
export async function twoDomainLayout(opts: {
  slug: string;
  model: string;
  stateDir: string;
  policy: FleetLayoutInput['fleet']['policy'];
  servingPath?: string;
  withTraining?: boolean;
  port?: () => Promise<number>;
}): Promise<FleetLayoutInput> {
  const port = opts.port ?? freePort;
  const domain = async (slug: string) => ({
    slug,
    supervisorUrl: `http://127.0.0.1:${await port()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: [{ name: opts.model, servingUrl: `http://127.0.0.1:${await port()}${opts.servingPath ?? ''}` }],
      },
      ...(opts.withTraining === false
        ? []
        : [
            {
              kind: 'training' as const,
              gpuIndex: 0,
              command: ['node', SIM_TRAINER],
              checkpointDir: path.join(opts.stateDir, slug, 'checkpoints'),
            },
          ]),
    ],
  });
  return {
    fleet: { slug: opts.slug, activeDomain: 'east', policy: opts.policy },
    domains: [await domain('east'), await domain('west')],
  };
}
