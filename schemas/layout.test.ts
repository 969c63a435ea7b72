import { readFileSync } from 'node:fs';
import path from 'node:path';
import { inputProblems, jsonPath } from './issues';
import { fleetLayoutSchema, type FleetLayoutInput } from './layout';

/** A valid two-domain layout; each test breaks one rule. */
function layout(): FleetLayoutInput & { [k: string]: unknown } {
  return {
    fleet: { slug: 'prod', activeDomain: 'east' },
    domains: [
      {
        slug: 'east',
        supervisorUrl: 'http://10.0.0.1:8701',
        slots: [
          {
            kind: 'inference',
            gpuIndex: 0,
            models: [
              { name: 'small', servingUrl: 'http://10.0.0.1:8000' },
              { name: 'tiny', servingUrl: 'http://10.0.0.1:8001' },
            ],
          },
          { kind: 'training', gpuIndex: 0, command: ['python', 'train.py'], checkpointDir: '/ckpt' },
        ],
      },
      {
        slug: 'west',
        supervisorUrl: 'https://10.0.1.1:8701',
        slots: [{ kind: 'inference', gpuIndex: 0, models: [{ name: 'small', servingUrl: 'http://10.0.1.1:8000' }] }],
      },
    ],
  };
}

/** The JSON paths of every problem the schema reports for `input`. */
function problemPaths(input: unknown): { path: string; message: string }[] {
  const parsed = fleetLayoutSchema.safeParse(input);
  if (parsed.success) return [];
  return inputProblems(parsed.error);
}

describe('fleet layout validation', () => {
  it('accepts the valid base layout and the committed example layouts', () => {
    expect(problemPaths(layout())).toEqual([]);
    const examples = path.join(__dirname, '..', 'examples');
    const dev = JSON.parse(readFileSync(path.join(examples, 'dev.layout.json'), 'utf8'));
    expect(problemPaths(dev)).toEqual([]);
  });

  it.each(['Prod', 'prod_1', '-prod', 'prod-', '', 'a'.repeat(64)])(
    'rejects the fleet slug %j at $.fleet.slug',
    (slug) => {
      const input = layout();
      input.fleet.slug = slug;
      expect(problemPaths(input)).toEqual([{ path: '$.fleet.slug', message: expect.stringContaining('slug') }]);
    },
  );

  it('rejects a bad domain slug at its own path', () => {
    const input = layout();
    input.domains[1]!.slug = 'West Coast';
    expect(problemPaths(input).map((p) => p.path)).toContain('$.domains[1].slug');
  });

  it('rejects duplicate domain slugs at the second occurrence', () => {
    const input = layout();
    input.domains[1]!.slug = 'east';
    expect(problemPaths(input)).toEqual([{ path: '$.domains[1].slug', message: 'duplicate domain slug "east"' }]);
  });

  it('rejects a model name bound twice in one domain, but allows it in another domain', () => {
    const input = layout();
    const slot = input.domains[0]!.slots[0]!;
    if (slot.kind !== 'inference') throw new Error('fixture');
    slot.models[1]!.name = 'small';
    expect(problemPaths(input)).toEqual([
      { path: '$.domains[0].slots[0].models[1].name', message: 'duplicate model name "small" in domain "east"' },
    ]);
  });

  it('requires the active domain to have an inference slot', () => {
    const input = layout();
    input.domains[0]!.slots = [input.domains[0]!.slots[1]!];
    expect(problemPaths(input)).toEqual([
      { path: '$.domains[0].slots', message: 'active domain "east" must have at least one inference slot' },
    ]);
  });

  it('requires the active domain to be one of the domains', () => {
    const input = layout();
    input.fleet.activeDomain = 'north';
    expect(problemPaths(input)).toEqual([
      { path: '$.fleet.activeDomain', message: 'active domain "north" is not one of the layout\'s domains' },
    ]);
  });

  it.each(['ftp://10.0.0.1:8701', 'file:///etc/passwd', 'javascript:alert(1)', '10.0.0.1:8701', 'not a url'])(
    'accepts only http/https URLs: %j is rejected at each URL field',
    (url) => {
      const input = layout();
      input.domains[0]!.supervisorUrl = url;
      input.domains[1]!.servingBaseUrl = url;
      const slot = input.domains[1]!.slots[0]!;
      if (slot.kind !== 'inference') throw new Error('fixture');
      slot.models[0]!.servingUrl = url;
      expect(problemPaths(input).map((p) => p.path)).toEqual([
        '$.domains[0].supervisorUrl',
        '$.domains[1].servingBaseUrl',
        '$.domains[1].slots[0].models[0].servingUrl',
      ]);
    },
  );

  it('rejects unknown keys at every level, naming the key', () => {
    const input = layout() as Record<string, unknown> & ReturnType<typeof layout>;
    input.extra = 1;
    (input.fleet as Record<string, unknown>).activeDomian = 'east';
    input.fleet.policy = { autoFailOver: false } as never;
    (input.domains[0] as Record<string, unknown>).gpu = 'H100';
    (input.domains[0]!.slots[0] as Record<string, unknown>).port = 8000;
    expect(
      problemPaths(input)
        .map((p) => `${p.path} ${p.message}`)
        .sort(),
    ).toEqual(
      [
        '$.extra unknown key',
        '$.fleet.activeDomian unknown key',
        '$.fleet.policy.autoFailOver unknown key',
        '$.domains[0].gpu unknown key',
        '$.domains[0].slots[0].port unknown key',
      ].sort(),
    );
  });

  it('reports every problem of a document at once', () => {
    const input = layout();
    input.fleet.slug = 'BAD';
    input.domains[1]!.slug = 'east';
    input.domains[0]!.supervisorUrl = 'ftp://x';
    expect(problemPaths(input).map((p) => p.path)).toEqual(
      expect.arrayContaining(['$.fleet.slug', '$.domains[1].slug', '$.domains[0].supervisorUrl']),
    );
  });
});

describe('URLs Haru calls', () => {
  const servingUrlProblems = (servingUrl: string) => {
    const input = layout();
    const slot = input.domains[0]!.slots[0]!;
    if (slot.kind === 'inference') slot.models[0]!.servingUrl = servingUrl;
    return problemPaths(input).filter((p) => p.path === '$.domains[0].slots[0].models[0].servingUrl');
  };

  it('refuses a link-local or cloud metadata address, at its JSON path, saying why', () => {
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://metadata.google.internal/computeMetadata/v1',
      'http://METADATA.GOOGLE.INTERNAL./v1',
      'http://100.100.100.200/latest',
      'http://[fd00:ec2::254]/latest',
      'http://[fe80::1]:8000/v1',
    ]) {
      expect(servingUrlProblems(url)).toEqual([
        expect.objectContaining({ message: expect.stringMatching(/link-local or cloud metadata address/) }),
      ]);
    }
    const input = layout();
    input.domains[1]!.supervisorUrl = 'http://169.254.169.254:8701';
    expect(problemPaths(input).map((p) => p.path)).toContain('$.domains[1].supervisorUrl');
  });

  it('refuses credentials in the URL and a host that is neither a name nor an address', () => {
    expect(servingUrlProblems('http://user:secret@10.0.0.1:8000/v1')).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/must not carry a user or password/) }),
    ]);
    // The URL parser takes these; an nginx config the host is written into would not survive them.
    expect(servingUrlProblems('http://a;}{b:8000/v1')).toEqual([
      expect.objectContaining({ message: 'host "a;}{b" is not a host name or an IP address' }),
    ]);
  });

  it('accepts names (container service names with _ included), IPv4 and IPv6 addresses', () => {
    for (const url of [
      'http://vllm_east:8000/v1',
      'https://gpu-1.example.com/v1',
      'http://10.0.0.1:8000',
      'http://[::1]:8000/v1',
    ])
      expect(servingUrlProblems(url)).toEqual([]);
  });
});

describe('launch spec', () => {
  const withLaunch = (launch: Record<string, unknown>) => {
    const input = layout();
    Object.assign(input.domains[1]!, { provider: 'skyserve', launch: { run: 'start.sh', ...launch } });
    return input;
  };

  it('accepts a workdir, an image (a cloud image or docker:<image>) and secrets by name', () => {
    for (const imageId of ['ami-0123456789abcdef0', 'docker:vllm/vllm-openai:v0.10.1']) {
      expect(problemPaths(withLaunch({ workdir: '.', imageId, secrets: ['HF_TOKEN'] }))).toEqual([]);
    }
  });

  it('refuses an empty docker image, a bad or reserved secret name, and a secret also written as an env', () => {
    expect(problemPaths(withLaunch({ imageId: 'docker:' }))).toEqual([
      { path: '$.domains[1].launch.imageId', message: expect.stringContaining('docker:<image>') },
    ]);
    expect(problemPaths(withLaunch({ secrets: ['HF-TOKEN', 'HARU_API_TOKEN', 'DATABASE_URL'] }))).toEqual([
      { path: '$.domains[1].launch.secrets[0]', message: expect.stringContaining('environment variable name') },
      { path: '$.domains[1].launch.secrets[1]', message: expect.stringContaining('reserved') },
      { path: '$.domains[1].launch.secrets[2]', message: expect.stringContaining('reserved') },
    ]);
    expect(problemPaths(withLaunch({ secrets: ['HF_TOKEN'], envs: { HF_TOKEN: 'hf_x' } }))).toEqual([
      { path: '$.domains[1].launch.secrets[0]', message: expect.stringContaining('must not be written into the YAML') },
    ]);
  });

  it('refuses more than one SkyServe replica, saying why', () => {
    expect(problemPaths(withLaunch({ replicas: 1 }))).toEqual([]);
    expect(problemPaths(withLaunch({ replicas: 2 }))).toEqual([
      {
        path: '$.domains[1].launch.replicas',
        message: expect.stringContaining('a domain has one supervisor, and SkyServe'),
      },
    ]);
  });
});

describe("a domain's supervisor settings", () => {
  const withAccess = (i: number, supervisor: Record<string, unknown>) => {
    const input = layout();
    Object.assign(input.domains[i]!, { supervisor });
    return input;
  };

  it('accepts a CA file for an https supervisor, a token by variable or file, and the plain-HTTP opt-in', () => {
    expect(
      problemPaths(withAccess(1, { caFile: '/etc/haru/west-ca.pem', tokenEnv: 'HARU_SECRET_WEST_TOKEN' })),
    ).toEqual([]);
    expect(problemPaths(withAccess(1, { tokenFile: '/etc/haru/secrets/west' }))).toEqual([]);
    expect(problemPaths(withAccess(0, { insecure: true }))).toEqual([]);
  });

  it('refuses both token sources, a token read from a control-plane secret, a CA for http, and a secret itself', () => {
    expect(
      problemPaths(withAccess(1, { tokenEnv: 'HARU_SECRET_EAST_TOKEN', tokenFile: '/etc/haru/secrets/t' })),
    ).toEqual([{ path: '$.domains[1].supervisor.tokenFile', message: 'set tokenEnv or tokenFile, not both' }]);
    expect(problemPaths(withAccess(1, { tokenEnv: 'HARU_API_TOKEN' }))).toEqual([
      { path: '$.domains[1].supervisor.tokenEnv', message: expect.stringContaining('must start with HARU_SECRET_') },
    ]);
    expect(problemPaths(withAccess(0, { caFile: '/ca.pem' }))).toEqual([
      { path: '$.domains[0].supervisor.caFile', message: expect.stringContaining('supervisorUrl is http://') },
    ]);
    expect(problemPaths(withAccess(1, { token: 's3cret' }))).toEqual([
      { path: '$.domains[1].supervisor.token', message: 'unknown key' },
    ]);
  });
});

describe('an issued supervisor token', () => {
  it('is for the hosts Haru launches: skypilot and skyserve, not static ones', () => {
    const input = (provider: string) => {
      const l = layout();
      Object.assign(l.domains[1]!, {
        provider,
        ...(provider === 'static' ? {} : { launch: { run: 'haru supervisor' } }),
        supervisor: { issueToken: true },
      });
      return l;
    };
    expect(problemPaths(input('skypilot'))).toEqual([]);
    expect(problemPaths(input('skyserve'))).toEqual([]);
    expect(problemPaths(input('static'))).toEqual([
      { path: '$.domains[1].supervisor.issueToken', message: expect.stringContaining('hosts it launches') },
    ]);
  });
});

describe('an issued supervisor certificate', () => {
  /** Domain `west` (https) as a skypilot domain with the given supervisor settings. */
  const issued = (supervisor: Record<string, unknown>, domain: Record<string, unknown> = {}) => {
    const input = layout();
    Object.assign(input.domains[1]!, {
      provider: 'skypilot',
      launch: { run: 'haru supervisor' },
      supervisor,
      ...domain,
    });
    return input;
  };

  it('is accepted for an https skypilot domain with the DNS name it is issued for', () => {
    expect(problemPaths(issued({ issueCertificate: true, serverName: 'west.gpu.example.com' }))).toEqual([]);
    // A server name alone (a host image's certificate reached at its IP) is fine on any domain.
    expect(
      problemPaths(issued({ serverName: 'west.gpu.example.com' }, { provider: 'static', launch: undefined })),
    ).toEqual([]);
  });

  it('refuses it without a name, with its own CA or insecure, on http, and off skypilot', () => {
    const paths = (input: unknown) => problemPaths(input).map((p) => p.path);
    expect(problemPaths(issued({ issueCertificate: true }))).toEqual([
      { path: '$.domains[1].supervisor.serverName', message: expect.stringContaining('stable DNS name') },
    ]);
    expect(paths(issued({ issueCertificate: true, serverName: 'w.example', caFile: '/ca.pem' }))).toEqual([
      '$.domains[1].supervisor.caFile',
    ]);
    expect(paths(issued({ issueCertificate: true, serverName: 'w.example', insecure: true }))).toEqual([
      '$.domains[1].supervisor.insecure',
    ]);
    expect(paths(issued({ issueCertificate: true, serverName: '10.0.1.1' }))).toEqual([
      '$.domains[1].supervisor.serverName',
    ]);
    expect(
      problemPaths(issued({ issueCertificate: true, serverName: 'w.example' }, { supervisorUrl: 'http://w:8701' })),
    ).toEqual([
      {
        path: '$.domains[1].supervisor.issueCertificate',
        message: expect.stringContaining('supervisorUrl is http://'),
      },
    ]);
    expect(problemPaths(issued({ issueCertificate: true, serverName: 'w.example' }, { provider: 'skyserve' }))).toEqual(
      [{ path: '$.domains[1].supervisor.issueCertificate', message: expect.stringContaining('not skyserve ones') }],
    );
  });

  it('keeps the secrets that carry it for Haru alone', () => {
    const input = issued({}, { launch: { run: 'x', secrets: ['HARU_SUPERVISOR_TLS_KEY_B64'] } });
    expect(problemPaths(input)).toEqual([
      { path: '$.domains[1].launch.secrets[0]', message: expect.stringContaining('is reserved') },
    ]);
  });
});

describe('jsonPath', () => {
  it('writes indexes in brackets and quotes keys that are not identifiers', () => {
    expect(jsonPath([])).toBe('$');
    expect(jsonPath(['domains', 0, 'slots', 2, 'models'])).toBe('$.domains[0].slots[2].models');
    expect(jsonPath(['env', 'MY-VAR'])).toBe('$.env["MY-VAR"]');
  });
});

describe('secret references: an allow-list', () => {
  const ENV_REFUSED = expect.stringContaining('must start with HARU_SECRET_');
  const FILE_REFUSED = expect.stringContaining('must be a file in /etc/haru/secrets (HARU_SECRETS_DIR)');
  const withAccess = (supervisor: Record<string, unknown>) => {
    const input = layout();
    Object.assign(input.domains[1]!, { supervisor });
    return input;
  };
  const withUpstreamAuth = (upstreamAuth: unknown) => {
    const input = layout();
    const slot = input.domains[0]!.slots[0]!;
    if (slot.kind === 'inference') slot.models[1] = { ...slot.models[1]!, upstreamAuth } as (typeof slot.models)[1];
    return input;
  };
  const saved = process.env.HARU_SECRETS_DIR;
  afterEach(() => {
    if (saved === undefined) delete process.env.HARU_SECRETS_DIR;
    else process.env.HARU_SECRETS_DIR = saved;
  });
  beforeEach(() => delete process.env.HARU_SECRETS_DIR);

  it.each(['HARU_API_TOKEN', 'DATABASE_URL', 'AWS_SECRET_ACCESS_KEY', 'HARU_SUPERVISOR_TOKEN', 'HARU_SECRET_'])(
    'refuses a variable not named HARU_SECRET_… (%s), at its JSON path',
    (name) => {
      expect(problemPaths(withAccess({ tokenEnv: name }))).toEqual([
        { path: '$.domains[1].supervisor.tokenEnv', message: ENV_REFUSED },
      ]);
      expect(problemPaths(withUpstreamAuth({ env: name }))).toEqual([
        { path: '$.domains[0].slots[0].models[1].upstreamAuth.env', message: ENV_REFUSED },
      ]);
    },
  );

  it.each([
    ['the API token file', '/etc/haru/api.token'],
    ['a path that climbs out', '/etc/haru/secrets/../api.token'],
    ['the directory itself', '/etc/haru/secrets'],
    ['a neighbour sharing its prefix', '/etc/haru/secrets-old/west'],
  ])('refuses a file outside the secrets directory (%s), at its JSON path', (_what, file) => {
    expect(problemPaths(withAccess({ tokenFile: file }))).toEqual([
      { path: '$.domains[1].supervisor.tokenFile', message: FILE_REFUSED },
    ]);
    expect(problemPaths(withUpstreamAuth({ file }))).toEqual([
      { path: '$.domains[0].slots[0].models[1].upstreamAuth.file', message: FILE_REFUSED },
    ]);
  });

  it('refuses a relative file, whatever directory it would resolve in', () => {
    expect(problemPaths(withAccess({ tokenFile: 'secrets/west' }))).toEqual([
      { path: '$.domains[1].supervisor.tokenFile', message: expect.stringContaining('must be an absolute path') },
    ]);
  });

  it('accepts HARU_SECRET_… variables and files in the directory HARU_SECRETS_DIR names', () => {
    expect(problemPaths(withUpstreamAuth({ env: 'HARU_SECRET_UPSTREAM_KEY' }))).toEqual([]);
    expect(problemPaths(withUpstreamAuth({ file: '/etc/haru/secrets/vllm/key' }))).toEqual([]);
    process.env.HARU_SECRETS_DIR = '/run/haru-secrets';
    expect(problemPaths(withAccess({ tokenFile: '/run/haru-secrets/west' }))).toEqual([]);
    expect(problemPaths(withAccess({ tokenFile: '/etc/haru/secrets/west' }))).toEqual([
      {
        path: '$.domains[1].supervisor.tokenFile',
        message: expect.stringContaining('must be a file in /run/haru-secrets (HARU_SECRETS_DIR)'),
      },
    ]);
  });

  it('refuses a HARU_SECRET_… variable as a launch secret: those go only where Haru sends them', () => {
    const input = layout();
    Object.assign(input.domains[1]!, {
      provider: 'skypilot',
      launch: { run: 'true', secrets: ['HF_TOKEN', 'HARU_SECRET_WEST_TOKEN'] },
    });
    expect(problemPaths(input)).toEqual([
      {
        path: '$.domains[1].launch.secrets[1]',
        message: expect.stringContaining('HARU_SECRET_… variables are the tokens'),
      },
    ]);
  });
});
