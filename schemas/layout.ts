import { z } from 'zod';
import { providerSchema, sleepLevelSchema } from './enums';
import { fleetPolicySchema } from './policy';
import { layoutSecretEnvSchema, layoutSecretFileSchema, layoutSecretRefSchema, SECRET_ENV_PREFIX } from './secret-ref';
import { trainingLayoutSchema } from './trainer-template';

/** Lowercase DNS-label style identifier: used in URLs, workflow ids and CLI arguments. */
export const slugSchema = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a slug: lowercase letters, digits and inner dashes (1-63)');

/** An absolute http(s) URL. Other schemes (file:, javascript:, ftp:) are refused. */
/**
 * Hosts of clouds' instance metadata services besides link-local 169.254.169.254 (GCP's name, Alibaba's
 * address, AWS's IPv6 address): a URL there would have the proxy or the worker fetch the host's cloud
 * credentials and relay the answer.
 */
const METADATA_HOSTS: ReadonlySet<string> = new Set([
  'metadata.google.internal',
  'metadata',
  '100.100.100.200',
  '[fd00:ec2::254]',
]);

/**
 * A host as the URL parser leaves it: DNS labels (with `_`, which container service names use), an IPv4
 * literal, or a bracketed IPv6 literal. The WHATWG parser accepts `;{}` and more in a host, and renderers write
 * hosts into configs (nginx), so anything else is refused.
 */
const HOST_SYNTAX =
  /^(\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?)$/i;

/** 169.254.0.0/16 and fe80::/10: link-local, where the metadata services and nothing Haru should serve live. */
const isLinkLocal = (hostname: string) =>
  /^169\.254\.\d+\.\d+$/.test(hostname) || /^\[fe[89ab][0-9a-f]:/i.test(hostname);

/**
 * An absolute http(s) URL that Haru will call (a model's servingUrl, a supervisor): no credentials in it (they go
 * in `upstreamAuth` or the supervisor's token), a host that is a name or an address, and never a link-local or
 * cloud metadata address (docs/architecture.md §9.3).
 */
export const httpUrlSchema = z
  .url({ protocol: /^https?$/, error: 'must be an absolute http:// or https:// URL' })
  .superRefine((value, ctx) => {
    // Zod runs this after a failed URL check too: that issue is the one to report.
    if (!URL.canParse(value)) return;
    const { protocol, username, password, hostname } = new URL(value);
    if (protocol !== 'http:' && protocol !== 'https:') return;
    if (username || password) {
      ctx.addIssue({
        code: 'custom',
        message:
          'must not carry a user or password (user:password@): credentials go in upstreamAuth or the supervisor token',
      });
    }
    if (!HOST_SYNTAX.test(hostname)) {
      ctx.addIssue({ code: 'custom', message: `host "${hostname}" is not a host name or an IP address` });
    } else if (isLinkLocal(hostname) || METADATA_HOSTS.has(hostname.toLowerCase().replace(/\.$/, ''))) {
      ctx.addIssue({
        code: 'custom',
        message: `host ${hostname} is a link-local or cloud metadata address: Haru never sends requests there`,
      });
    }
  });

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
  /**
   * The bearer token the proxy and the promotion's probe send to `servingUrl` (a vLLM started with `--api-key`
   * and reached directly): an environment variable (named `HARU_SECRET_…`) or a file (in HARU_SECRETS_DIR) of
   * the API and worker processes. The layout names it, never holds it.
   */
  upstreamAuth: layoutSecretRefSchema.optional(),
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

const envNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name');

/**
 * The secrets that carry a supervisor certificate Haru issued (`supervisor.issueCertificate`) to its host: the
 * PEM certificate and key, base64 on one line, since a multi-line value is not safe through every command
 * runner on the way. The host's run writes them to files (`examples/supervisor-tls.sh`).
 */
export const SUPERVISOR_TLS_SECRETS = {
  cert: 'HARU_SUPERVISOR_TLS_CERT_B64',
  key: 'HARU_SUPERVISOR_TLS_KEY_B64',
} as const;

/**
 * Variables of Haru's own processes that must never be sent to a host, and those Haru sends itself (the
 * supervisor token, an issued certificate): a launch spec's `secrets` may name none of them.
 */
export const RESERVED_SECRET_NAMES = [
  'HARU_SUPERVISOR_TOKEN',
  'HARU_API_TOKEN',
  'DATABASE_URL',
  SUPERVISOR_TLS_SECRETS.cert,
  SUPERVISOR_TLS_SECRETS.key,
] as const;

/**
 * Why a skyserve domain runs one replica: Haru drives one supervisor per domain (sleep, wake, training,
 * status), at one address. Behind SkyServe's load balancer each call would reach whichever replica the
 * balancer picks, so the other replicas would keep serving while Haru believes them asleep, or train on a
 * GPU Haru believes free. Two domains in the layout are the way to run two hosts.
 */
export const ONE_REPLICA_REASON =
  "a domain has one supervisor, and SkyServe's load balancer would send each supervisor call (sleep, wake, " +
  'training) to just one of several replicas; declare one domain per host instead';

/** How a skypilot/skyserve domain is launched: what is shipped to the provisioned host and run there. */
export const launchSpecSchema = z
  .strictObject({
    /**
     * A directory on the worker's machine that SkyPilot copies to the host (`~/sky_workdir`, without what
     * its .gitignore excludes) and runs `setup` and `run` in. A relative path is relative to the worker's
     * working directory (`.`: the Haru checkout the worker runs from, which ships `bin/haru.js` and
     * `examples/`). Without it the commands run in an empty home directory: they can only use what the
     * image has.
     */
    workdir: z.string().min(1).optional(),
    /**
     * The host's image (`resources.image_id`): a cloud image id (`ami-…`, `projects/…/images/…`) or
     * `docker:<image>` to run the task in that container.
     */
    imageId: z
      .string()
      .min(1)
      .refine((id) => id !== 'docker:' && !/\s/.test(id), 'must be an image id or docker:<image>')
      .optional(),
    /** Installs what `run` needs, once per launch (Node and Haru's dependencies, vLLM). */
    setup: z.string().optional(),
    run: z.string().min(1),
    envs: z.record(envNameSchema, z.string()).optional(),
    /**
     * Names of variables of the worker's environment handed to the host with `sky launch --secret NAME`
     * (an `HF_TOKEN` for gated models): the value never enters the YAML or argv, and SkyPilot redacts it.
     * HARU_SUPERVISOR_TOKEN is always sent; Haru's own HARU_API_TOKEN and DATABASE_URL never are.
     */
    secrets: z
      .array(
        envNameSchema.refine(
          (name) => !(RESERVED_SECRET_NAMES as readonly string[]).includes(name),
          'is reserved: HARU_SUPERVISOR_TOKEN and an issued certificate are sent by Haru itself, HARU_API_TOKEN and ' +
            'DATABASE_URL never leave it',
        ),
      )
      .optional(),
    /** Ports to open on the host; default: the supervisor's port. */
    ports: z.array(hostPortSchema).optional(),
    /** SkyServe replicas: only 1 (see {@link ONE_REPLICA_REASON}). */
    replicas: z.number().int().min(1).max(1, `must be 1: ${ONE_REPLICA_REASON}`).optional(),
    service: serveSpecSchema.optional(),
    /**
     * The domain's `supervisorUrl` is a stable name (DNS, a reserved IP) that reaches the launched host: keep
     * it. Default (false): after each launch Haru asks SkyPilot where the supervisor's port is exposed
     * (`sky status --endpoint PORT CLUSTER`; for skyserve `sky serve status --endpoint SERVICE`) and uses
     * that address.
     */
    pinSupervisorUrl: z.boolean().optional(),
  })
  .superRefine((launch, ctx) => {
    for (const [i, name] of (launch.secrets ?? []).entries()) {
      if (name.startsWith(SECRET_ENV_PREFIX)) {
        ctx.addIssue({
          code: 'custom',
          path: ['secrets', i],
          message: `${SECRET_ENV_PREFIX}… variables are the tokens Haru sends itself, each to its own host; a launch secret is handed to the host under its own name (HF_TOKEN)`,
        });
      }
      if (launch.envs && name in launch.envs) {
        ctx.addIssue({
          code: 'custom',
          path: ['secrets', i],
          message: `"${name}" is also in envs: a secret's value must not be written into the YAML`,
        });
      }
    }
  });
export type LaunchSpec = z.infer<typeof launchSpecSchema>;

/** A DNS name (letters, digits, dashes, dots; a `*.` wildcard is not a name a host serves under). */
const dnsNameSchema = z
  .string()
  .max(253)
  .regex(
    /^(?=.*[a-z])[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i,
    'must be a DNS name (not an IP address)',
  );

/**
 * How the worker (and the `haru` CLI) reach one domain's supervisor: the CA its certificate is checked
 * against and where its bearer token comes from. Names a file or a variable, never a secret: the layout is
 * stored in the database and shown by the API. Unset fields fall back to the fleet-wide HARU_SUPERVISOR_CA_FILE
 * (else the system CAs) and HARU_SUPERVISOR_TOKEN.
 */
export const supervisorAccessSchema = z
  .strictObject({
    /** PEM file, on the worker's machine, of the CA that signed this supervisor's certificate (https:// only). */
    caFile: z.string().min(1).optional(),
    /** The variable of the worker's environment holding this domain's token: named `HARU_SECRET_…`. */
    tokenEnv: layoutSecretEnvSchema.optional(),
    /**
     * A file, on the worker's machine, holding this domain's token (whitespace around it is dropped): in
     * HARU_SECRETS_DIR, mode 600 or stricter.
     */
    tokenFile: layoutSecretFileSchema.optional(),
    /**
     * Allows plain http:// to a supervisor that is not on loopback: the token and every command then cross
     * the network readable by anyone on the path. For a private network you trust; the worker warns at each use.
     */
    insecure: z.boolean().optional(),
    /**
     * The DNS name the supervisor's certificate is verified under (TLS server name), whatever address the
     * worker reaches it at: SkyPilot reports a launched host by its IP, which no certificate issued before the
     * launch can name. Default: the host of the supervisor URL.
     */
    serverName: dnsNameSchema.optional(),
    /**
     * Haru issues this domain's supervisor a certificate for `serverName` from the fleet's supervisor CA
     * (HARU_SUPERVISOR_CA_FILE and HARU_SUPERVISOR_CA_KEY_FILE on the worker) at every provisioning, and hands it
     * to the host with the launch as secrets (skypilot domains only). The worker verifies it against that CA.
     */
    issueCertificate: z.boolean().optional(),
    /**
     * This domain's hosts get a token of their own, derived by the worker from the token it would otherwise send
     * (`tokenEnv`/`tokenFile`, else HARU_SUPERVISOR_TOKEN) and the domain's id, and handed over with each launch
     * as its `--secret HARU_SUPERVISOR_TOKEN` (skypilot and skyserve domains only): a host that leaks its token
     * opens no other host. Nothing is stored: every worker derives the same token.
     */
    issueToken: z.boolean().optional(),
  })
  .superRefine((access, ctx) => {
    if (access.tokenEnv && access.tokenFile) {
      ctx.addIssue({ code: 'custom', path: ['tokenFile'], message: 'set tokenEnv or tokenFile, not both' });
    }
    if (!access.issueCertificate) return;
    const conflict = (path: 'serverName' | 'caFile' | 'insecure', message: string) =>
      ctx.addIssue({ code: 'custom', path: [path], message });
    if (!access.serverName) {
      conflict('serverName', 'an issued certificate needs the stable DNS name it is issued for (serverName)');
    }
    if (access.caFile) {
      conflict('caFile', 'an issued certificate is verified against HARU_SUPERVISOR_CA_FILE, the CA that issues it');
    }
    if (access.insecure) conflict('insecure', 'an issued certificate is for https://; insecure allows plain http://');
  });
export type SupervisorAccess = z.infer<typeof supervisorAccessSchema>;

export const domainLayoutSchema = z
  .strictObject({
    slug: slugSchema,
    displayName: z.string().min(1).max(200).optional(),
    provider: providerSchema.default('static'),
    placement: placementSchema.default({}),
    supervisorUrl: httpUrlSchema,
    /** CA, token source and the plain-HTTP opt-in of this domain's supervisor (see {@link supervisorAccessSchema}). */
    supervisor: supervisorAccessSchema.optional(),
    servingBaseUrl: httpUrlSchema.optional(),
    launch: launchSpecSchema.optional(),
    slots: z.array(slotLayoutSchema).min(1),
  })
  .superRefine((domain, ctx) => {
    if (domain.supervisor?.caFile && !domain.supervisorUrl.startsWith('https:')) {
      ctx.addIssue({
        code: 'custom',
        path: ['supervisor', 'caFile'],
        message: 'a CA verifies an https:// supervisor; supervisorUrl is http://',
      });
    }
    if (domain.supervisor?.issueToken && domain.provider === 'static') {
      ctx.addIssue({
        code: 'custom',
        path: ['supervisor', 'issueToken'],
        message: 'Haru hands tokens to the hosts it launches (skypilot, skyserve); a static host has the token you set',
      });
    }
    if (domain.supervisor?.issueCertificate) {
      const issue = (message: string) =>
        ctx.addIssue({ code: 'custom', path: ['supervisor', 'issueCertificate'], message });
      // SkyServe's load balancer forwards plain HTTP to its replicas: it cannot carry the supervisor's TLS.
      if (domain.provider !== 'skypilot')
        issue(`Haru issues certificates to skypilot hosts it launches, not ${domain.provider} ones`);
      if (!domain.supervisorUrl.startsWith('https:'))
        issue('an issued certificate serves https://; supervisorUrl is http://');
    }
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
    /** Trainer templates that training jobs may name (schemas/trainer-template.ts); none when absent. */
    training: trainingLayoutSchema.optional(),
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
