import { z } from 'zod';
import { providerSchema, sleepLevelSchema } from './enums';
import { fleetPolicySchema } from './policy';

/** Lowercase DNS-label style identifier: used in URLs, workflow ids and CLI arguments. */
export const slugSchema = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a slug: lowercase letters, digits and inner dashes (1-63)');

/** An absolute http(s) URL. Other schemes (file:, javascript:, ftp:) are refused. */
export const httpUrlSchema = z.url({ protocol: /^https?$/, error: 'must be an absolute http:// or https:// URL' });

export const modelNameSchema = z.string().min(1).max(256);
export const gpuIndexSchema = z.number().int().min(0).max(63);

/** Where a domain runs. Rendered into SkyPilot resources for skypilot/skyserve domains; informational for static ones. */
export const placementSchema = z.strictObject({
  cloud: z.string().min(1).optional(),
  region: z.string().min(1).optional(),
  zone: z.string().min(1).optional(),
  /** SkyPilot accelerator spec, e.g. `H100:8` or `A10G:1`. */
  accelerators: z.string().min(1).optional(),
  useSpot: z.boolean().optional(),
});
export type Placement = z.infer<typeof placementSchema>;

/** One served model: its name as clients send it and the URL the proxy forwards to. */
export const modelBindingSchema = z.strictObject({
  name: modelNameSchema,
  servingUrl: httpUrlSchema,
});
export type ModelBinding = z.infer<typeof modelBindingSchema>;

export const inferenceSlotLayoutSchema = z.strictObject({
  kind: z.literal('inference'),
  gpuIndex: gpuIndexSchema,
  sleepLevel: sleepLevelSchema.default(1),
  models: z.array(modelBindingSchema).min(1),
});

export const trainingSlotLayoutSchema = z.strictObject({
  kind: z.literal('training'),
  gpuIndex: gpuIndexSchema,
  command: z.array(z.string().min(1)).min(1),
  checkpointDir: z.string().min(1),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'), z.string())
    .optional(),
});

export const slotLayoutSchema = z.discriminatedUnion('kind', [inferenceSlotLayoutSchema, trainingSlotLayoutSchema]);
export type SlotLayout = z.infer<typeof slotLayoutSchema>;
export type InferenceSlotLayout = z.infer<typeof inferenceSlotLayoutSchema>;
export type TrainingSlotLayout = z.infer<typeof trainingSlotLayoutSchema>;

const hostPortSchema = z.number().int().min(1).max(65_535);

/** SkyServe settings of a skyserve domain (ignored for skypilot). */
export const serveSpecSchema = z.strictObject({
  /** The replica port SkyServe's load balancer sends to; default: the supervisor's port. */
  port: hostPortSchema.optional(),
  /** Readiness probe path on that port; default `/healthz` on the supervisor's port, `/health` (vLLM's) otherwise. */
  readinessPath: z.string().regex(/^\//, 'must be a path starting with /').optional(),
  /** How long a new replica may take to pass its first probe (model download and load); default 1200. */
  initialDelaySeconds: z.number().int().min(0).optional(),
});
export type ServeSpec = z.infer<typeof serveSpecSchema>;

/** How a skypilot/skyserve domain is launched: commands run on the provisioned host. */
export const launchSpecSchema = z.strictObject({
  setup: z.string().optional(),
  run: z.string().min(1),
  envs: z.record(z.string(), z.string()).optional(),
  /** Ports to open on the host; default: the supervisor's port. */
  ports: z.array(hostPortSchema).optional(),
  replicas: z.number().int().min(1).optional(),
  service: serveSpecSchema.optional(),
  /**
   * The domain's `supervisorUrl` is a stable name (DNS, a reserved IP) that reaches the launched host: keep
   * it. Default (false): after each launch Haru asks SkyPilot where the supervisor's port is exposed
   * (`sky status --endpoint PORT CLUSTER`; for skyserve `sky serve status --endpoint SERVICE`) and uses
   * that address.
   */
  pinSupervisorUrl: z.boolean().optional(),
});
export type LaunchSpec = z.infer<typeof launchSpecSchema>;

export const domainLayoutSchema = z.strictObject({
  slug: slugSchema,
  displayName: z.string().min(1).max(200).optional(),
  provider: providerSchema.default('static'),
  placement: placementSchema.default({}),
  supervisorUrl: httpUrlSchema,
  servingBaseUrl: httpUrlSchema.optional(),
  launch: launchSpecSchema.optional(),
  slots: z.array(slotLayoutSchema).min(1),
});
export type DomainLayout = z.infer<typeof domainLayoutSchema>;

/**
 * A fleet layout file: the fleet, its policy and its failure domains. `activeDomain` is the domain that
 * serves when the fleet is first created; re-applying a layout never moves the routing pointer.
 */
export const fleetLayoutSchema = z
  .strictObject({
    $schema: z.string().optional(),
    fleet: z.strictObject({
      slug: slugSchema,
      displayName: z.string().min(1).max(200).optional(),
      activeDomain: slugSchema,
      policy: fleetPolicySchema.prefault({}),
    }),
    domains: z.array(domainLayoutSchema).min(1),
  })
  .superRefine((layout, ctx) => {
    const seen = new Map<string, number>();
    layout.domains.forEach((domain, i) => {
      if (seen.has(domain.slug)) {
        ctx.addIssue({
          code: 'custom',
          path: ['domains', i, 'slug'],
          message: `duplicate domain slug "${domain.slug}"`,
        });
      }
      seen.set(domain.slug, i);
      const models = new Set<string>();
      const gpuKinds = new Set<string>();
      domain.slots.forEach((slot, j) => {
        const key = `${slot.gpuIndex}/${slot.kind}`;
        if (gpuKinds.has(key)) {
          ctx.addIssue({
            code: 'custom',
            path: ['domains', i, 'slots', j, 'gpuIndex'],
            message: `GPU ${slot.gpuIndex} already has a ${slot.kind} slot in domain "${domain.slug}"`,
          });
        }
        gpuKinds.add(key);
        if (slot.kind !== 'inference') return;
        slot.models.forEach((model, k) => {
          if (models.has(model.name)) {
            ctx.addIssue({
              code: 'custom',
              path: ['domains', i, 'slots', j, 'models', k, 'name'],
              message: `duplicate model name "${model.name}" in domain "${domain.slug}"`,
            });
          }
          models.add(model.name);
        });
      });
    });
    const activeIndex = seen.get(layout.fleet.activeDomain);
    if (activeIndex === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['fleet', 'activeDomain'],
        message: `active domain "${layout.fleet.activeDomain}" is not one of the layout's domains`,
      });
    } else if (!layout.domains[activeIndex]?.slots.some((s) => s.kind === 'inference')) {
      ctx.addIssue({
        code: 'custom',
        path: ['domains', activeIndex, 'slots'],
        message: `active domain "${layout.fleet.activeDomain}" must have at least one inference slot`,
      });
    }
  });
export type FleetLayout = z.infer<typeof fleetLayoutSchema>;
export type FleetLayoutInput = z.input<typeof fleetLayoutSchema>;
