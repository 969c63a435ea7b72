import { createPrivateKey, X509Certificate } from 'node:crypto';
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { fetch as undiciFetch } from 'undici';
import { ApplicationFailure } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { domains as domainsTable } from '../db/schema';
import { createTestPki } from '../test/support/pki';
import { loadSupervisorCertificateIssuer, type SupervisorCertificateIssuer } from './provisioning-certificate';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import { SkyCommandError } from '../drivers/errors';
import type { SkyCli } from '../drivers/sky';
import type { SkyCluster, SkyService } from '../drivers/sky-output';
import type { DomainState } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import type { FleetLayoutInput } from '../schemas/layout';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { FakeHost } from '../test/support/fake-host';
import { createProvisioningActivities } from './provisioning';
import { createSupervisorAccess } from '../clients/supervisor-access';

/** An in-memory `sky`: records every call and answers from what the test set. */
class FakeSkyCli implements SkyCli {
  calls: {
    method: string;
    name: string;
    yaml?: string;
    secrets?: Readonly<Record<string, string>>;
    port?: number;
  }[] = [];
  cluster: SkyCluster | null = null;
  service: SkyService | null = null;
  /** Thrown by the next call of the named method. */
  failures = new Map<string, Error>();
  /** Output chunks a launch prints before it returns. */
  launchOutput: string[] = [];

  private take(method: string, name: string, extra: object = {}) {
    this.calls.push({ method, name, ...extra });
    const err = this.failures.get(method);
    if (err) {
      this.failures.delete(method);
      throw err;
    }
  }
  launch: SkyCli['launch'] = async (input, opts) => {
    this.take('launch', input.name, { yaml: input.yaml, secrets: input.secrets });
    for (const chunk of this.launchOutput) opts?.onOutput?.(chunk);
  };
  serveUp: SkyCli['serveUp'] = async (input) =>
    this.take('serveUp', input.name, { yaml: input.yaml, secrets: input.secrets });
  status: SkyCli['status'] = async (name) => (this.take('status', name), this.cluster);
  serveStatus: SkyCli['serveStatus'] = async (name) => (this.take('serveStatus', name), this.service);
  /** What `endpoint` / `serveEndpoint` answer. */
  reportedEndpoint: string | null = 'http://10.1.2.3:8701';
  endpoint: SkyCli['endpoint'] = async (name, port) => (this.take('endpoint', name, { port }), this.reportedEndpoint);
  serveEndpoint: SkyCli['serveEndpoint'] = async (name) => (this.take('serveEndpoint', name), this.reportedEndpoint);
  /** Whether a stop, down or serve down leaves its target listed (a teardown that did not take). */
  sticky = false;
  /** What `serveDown` answers for a listed service (`purged`: SkyServe skipped a failed one). */
  serveDownResult: 'down' | 'purged' = 'down';
  stop: SkyCli['stop'] = async (name) => {
    this.take('stop', name);
    if (this.cluster && !this.sticky) this.cluster = { ...this.cluster, status: 'STOPPED', statusText: 'STOPPED' };
    return this.cluster ? 'stopped' : 'not_found';
  };
  down: SkyCli['down'] = async (name) => {
    this.take('down', name);
    const result = this.cluster ? 'down' : 'not_found';
    if (!this.sticky) this.cluster = null;
    return result;
  };
  serveDown: SkyCli['serveDown'] = async (name) => {
    this.take('serveDown', name);
    const result = this.service ? this.serveDownResult : 'not_found';
    if (!this.sticky) this.service = null;
    return result;
  };
}

const TOKEN = 'int-token';
/** The worker environment a domain's `supervisor.tokenEnv` is read from. */
const DOMAIN_ENV = { HARU_SECRET_WEST_TOKEN: 'west-token' };
let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(() => tdb?.drop());

let counter = 0;
/** A fleet with an active skypilot `east`, a skypilot `west`, a skyserve `serve`, a static `fixed`, and `bare` without launch spec. */
async function fleet(states: Partial<Record<string, DomainState>> = {}) {
  const slug = `pa${++counter}`;
  const layout: FleetLayoutInput = {
    fleet: { slug, activeDomain: 'east' },
    domains: ['east', 'west', 'serve', 'fixed', 'bare'].map((d, i) => ({
      slug: d,
      provider: d === 'serve' ? 'skyserve' : d === 'fixed' ? 'static' : 'skypilot',
      supervisorUrl: `http://127.0.0.1:${20 + i}`,
      ...(d === 'bare' ? {} : { launch: { run: 'haru supervisor' } }),
      slots: [
        { kind: 'inference', gpuIndex: 0, models: [{ name: 'llama', servingUrl: `http://127.0.0.1:${30 + i}/v1` }] },
        { kind: 'training', gpuIndex: 0, command: ['node', 'train.js'], checkpointDir: '/tmp/ckpt' },
      ],
    })),
  };
  const report = await seedLayout(tdb.store, layout);
  const snapshot = (await tdb.store.fleets.snapshot(report.fleetId))!;
  const ids = Object.fromEntries(snapshot.domains.map((d) => [d.slug, d.id])) as Record<string, string>;
  for (const [d, state] of Object.entries(states)) await setState(ids[d]!, state!);
  return { slug, fleetId: report.fleetId, ids };
}

/** Walks a domain to `state` along allowed edges from `provisioning`. */
async function setState(id: string, state: DomainState) {
  const paths: Record<DomainState, DomainState[]> = {
    provisioning: [],
    ready: ['ready'],
    degraded: ['degraded'],
    failed: ['failed'],
    stopping: ['stopping'],
    stopped: ['stopping', 'stopped'],
  };
  for (const step of paths[state]) await tdb.store.domains.transition(id, step);
}

function setup(
  opts: { sky?: FakeSkyCli | null; healthy?: () => boolean; certificates?: SupervisorCertificateIssuer } = {},
) {
  const sky = opts.sky === null ? undefined : (opts.sky ?? new FakeSkyCli());
  const host = new FakeHost();
  const healthy = opts.healthy ?? (() => true);
  const fetchImpl = (async () => {
    if (!healthy()) throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    return new Response('{"ok":true}', { status: 200 });
  }) as unknown as typeof undiciFetch;
  const acts = createProvisioningActivities({
    store: tdb.store,
    supervisor: host.client,
    now: () => new Date(),
    pollIntervalMs: 5,
    skyPollIntervalMs: 5,
    teardownCheckWithinMs: 200,
    sky,
    supervisorAccess: createSupervisorAccess({ token: TOKEN, env: DOMAIN_ENV }),
    supervisorCertificates: opts.certificates,
    fetch: fetchImpl,
  });
  return { acts, sky: sky as FakeSkyCli, host };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const run = <F extends (...args: any[]) => Promise<unknown>>(fn: F, ...args: Parameters<F>) =>
  runIn(quietEnvironment({ attempt: 1 }), fn, ...args);
const failureOf = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
};
const stateOf = async (id: string) => (await tdb.store.domains.get(id))!.state;

describe('beginProvisioning', () => {
  it('moves a failed domain back to provisioning, records an event, and describes the target', async () => {
    const f = await fleet({ west: 'failed' });
    const { acts } = setup();
    const target = await run(acts.beginProvisioning, { domainId: f.ids.west! });
    expect(target).toMatchObject({
      domainId: f.ids.west,
      fleetId: f.fleetId,
      provider: 'skypilot',
      skyName: `haru-${f.slug}-west`,
      isActive: false,
      inferenceSlotCount: 1,
      trainingSlotCount: 1,
    });
    expect(await stateOf(f.ids.west!)).toBe('provisioning');
    const events = await tdb.store.events.list(f.fleetId);
    expect(events.map((e) => e.message)).toContain('domain west: failed -> provisioning');
  });

  it('refuses a static domain, one without a launch spec, a ready one and one being torn down, changing nothing', async () => {
    const f = await fleet({ west: 'ready', serve: 'stopping' });
    const { acts } = setup();
    const cases: [string, RegExp][] = [
      ['fixed', /static/],
      ['bare', /no launch spec/],
      ['west', /west is ready: tear it down/],
      ['serve', /being torn down/],
    ];
    for (const [slug, message] of cases) {
      const failure = await failureOf(run(acts.beginProvisioning, { domainId: f.ids[slug]! }));
      expect(failure.type).toBe(FailureType.InvalidTarget);
      expect(failure.nonRetryable).toBe(true);
      expect(failure.message).toMatch(message);
    }
    expect(await stateOf(f.ids.west!)).toBe('ready');
    expect(await stateOf(f.ids.serve!)).toBe('stopping');
  });
});

describe('launchDomain', () => {
  it('launches the rendered task YAML with the supervisor token as a secret, heartbeating the CLI output', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    sky.launchOutput = ['⚙︎ Launching on AWS (us-east-1).\n', '\u001b[32m✓ Cluster launched\u001b[0m\n'];
    const env = quietEnvironment({ attempt: 1 });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const result = await runIn(env, acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 });
    expect(result).toEqual({ attempt: 1, skyName: `haru-${f.slug}-west`, provider: 'skypilot' });
    expect(sky.calls).toHaveLength(1);
    expect(sky.calls[0]).toMatchObject({
      method: 'launch',
      name: `haru-${f.slug}-west`,
      secrets: { HARU_SUPERVISOR_TOKEN: TOKEN },
    });
    expect(sky.calls[0]!.yaml).toContain('run: haru supervisor');
    expect(sky.calls[0]!.yaml).not.toContain(TOKEN);
    expect(beats).toContainEqual({ waitingFor: `sky launch haru-${f.slug}-west`, lastOutput: '✓ Cluster launched' });
  });

  it("passes the domain's own token (its layout's tokenEnv) as the secret, and names an unset one", async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    const setAccess = (supervisor: { tokenEnv: string }) =>
      tdb.database.db.update(domainsTable).set({ supervisor }).where(eq(domainsTable.id, f.ids.west!));
    await setAccess({ tokenEnv: 'HARU_SECRET_WEST_TOKEN' });
    await run(acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 });
    expect(sky.calls[0]).toMatchObject({ secrets: { HARU_SUPERVISOR_TOKEN: 'west-token' } });
    await setAccess({ tokenEnv: 'HARU_SECRET_UNSET' });
    const failure = await failureOf(run(acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 }));
    expect(failure).toMatchObject({
      type: FailureType.SupervisorMisconfigured,
      nonRetryable: true,
      message: 'domain west: supervisor.tokenEnv: HARU_SECRET_UNSET is not set',
    });
    expect(sky.calls).toHaveLength(1); // nothing launched without its token
  });

  it('issues a certificate for serverName to a domain that asks, handing it over only as secrets, with an event', async () => {
    const f = await fleet();
    const pki = createTestPki();
    const caKey = path.join(pki.dir, 'ca.key');
    chmodSync(caKey, 0o600);
    const certificates = loadSupervisorCertificateIssuer({
      HARU_SUPERVISOR_CA_FILE: pki.ca,
      HARU_SUPERVISOR_CA_KEY_FILE: caKey,
    });
    const supervisor = { issueCertificate: true, serverName: 'west.gpu.example.com' };
    await tdb.database.db
      .update(domainsTable)
      .set({ supervisor, supervisorUrl: 'https://west.gpu.example.com:8701' })
      .where(eq(domainsTable.id, f.ids.west!));

    // Without the CA's key the worker cannot issue it: nothing is launched, and the failure says what to set.
    const unable = setup();
    const failure = await failureOf(run(unable.acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 }));
    expect(failure).toMatchObject({ type: FailureType.SupervisorMisconfigured, nonRetryable: true });
    expect((failure as Error).message).toMatch(/supervisor\.issueCertificate needs .*HARU_SUPERVISOR_CA_KEY_FILE/);
    expect(unable.sky.calls).toEqual([]);

    const { acts, sky } = setup({ certificates });
    const result = await run(acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 });
    const secrets = sky.calls[0]!.secrets!;
    expect(Object.keys(secrets).sort()).toEqual([
      'HARU_SUPERVISOR_TLS_CERT_B64',
      'HARU_SUPERVISOR_TLS_KEY_B64',
      'HARU_SUPERVISOR_TOKEN',
    ]);
    const cert = new X509Certificate(Buffer.from(secrets.HARU_SUPERVISOR_TLS_CERT_B64!, 'base64'));
    const key = createPrivateKey(Buffer.from(secrets.HARU_SUPERVISOR_TLS_KEY_B64!, 'base64'));
    expect(cert.checkPrivateKey(key)).toBe(true);
    expect(cert.verify(new X509Certificate(readFileSync(pki.ca)).publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe('DNS:west.gpu.example.com');
    expect(result.certificate).toEqual({
      serverName: 'west.gpu.example.com',
      serial: cert.serialNumber,
      notAfter: new Date(cert.validTo).toISOString(),
      fingerprint256: cert.fingerprint256,
    });
    const events = await tdb.store.events.list(f.fleetId, { limit: 100 });
    expect(events.find((e) => e.type === 'domain.certificate_issued')?.data).toEqual(result.certificate);
    expect(sky.calls[0]!.yaml).not.toContain(secrets.HARU_SUPERVISOR_TLS_KEY_B64!);
    rmSync(pki.dir, { recursive: true, force: true });
  });

  it('brings a skyserve domain up with serve up', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    await run(acts.launchDomain, { domainId: f.ids.serve!, timeoutMs: 60_000 });
    expect(sky.calls[0]).toMatchObject({ method: 'serveUp', name: `haru-${f.slug}-serve` });
    expect(sky.calls[0]!.yaml).toMatch(/^service:/m);
  });

  it('turns a failed launch into non-retryable LaunchFailed carrying the command and stderr', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    sky.failures.set('launch', new SkyCommandError(['sky', 'launch'], 'exit', 1, 'ResourcesUnavailableError: no H100'));
    const failure = await failureOf(run(acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 }));
    expect(failure.type).toBe(FailureType.LaunchFailed);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/exited with code 1: ResourcesUnavailableError: no H100/);
    expect(failure.details?.[0]).toMatchObject({ command: ['sky', 'launch'], exitCode: 1, reason: 'exit' });
  });

  it('fails non-retryably when the worker has no sky CLI', async () => {
    const f = await fleet();
    const { acts } = setup({ sky: null });
    const failure = await failureOf(run(acts.launchDomain, { domainId: f.ids.west!, timeoutMs: 60_000 }));
    expect(failure.type).toBe(FailureType.ProvisioningUnavailable);
  });
});

describe('awaitSupervisor', () => {
  it('waits while /healthz is refused and returns once the supervisor reports every model', async () => {
    const f = await fleet();
    let healthChecks = 0;
    const { acts, host } = setup({ healthy: () => ++healthChecks > 3 });
    host.models = [];
    host.onStatus = (h, reads) => {
      if (reads >= 2) h.models = [{ name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: 0 }];
    };
    const env = quietEnvironment({ attempt: 1 });
    const waits: string[] = [];
    env.on('heartbeat', (d: { waitingFor: string }) => waits.push(d.waitingFor));
    expect(await runIn(env, acts.awaitSupervisor, { domainId: f.ids.west! })).toEqual({
      attempt: 1,
      models: ['llama'],
    });
    expect(waits[0]).toMatch(/healthz: ECONNREFUSED/);
    expect(waits).toContain('models not up on the supervisor: llama');
  });

  it('fails fast with LaunchFailed when sky says the cluster is gone', async () => {
    const f = await fleet();
    const { acts, sky } = setup({ healthy: () => false });
    sky.cluster = null;
    const failure = await failureOf(run(acts.awaitSupervisor, { domainId: f.ids.west!, skyCheckEveryMs: 0 }));
    expect(failure.type).toBe(FailureType.LaunchFailed);
    expect(failure.message).toMatch(/cluster haru-.*-west is gone while waiting/);
  });

  it.each([
    ['AUTOSTOPPING', 'AUTOSTOPPING', /cluster haru-.*-west is AUTOSTOPPING while waiting/],
    ['UNHEALTHY', 'UNHEALTHY', /cluster haru-.*-west is UNHEALTHY while waiting/],
    ['unknown', 'BOOTING', /cluster haru-.*-west has unknown status "BOOTING" while waiting/],
  ] as const)(
    'fails fast with LaunchFailed, naming what sky printed, when the cluster is %s',
    async (status, statusText, message) => {
      const f = await fleet();
      const { acts, sky } = setup({ healthy: () => false });
      sky.cluster = { name: 'x', status, statusText, infra: null, resources: null, autostop: null, launched: null };
      const failure = await failureOf(run(acts.awaitSupervisor, { domainId: f.ids.west!, skyCheckEveryMs: 0 }));
      expect(failure).toMatchObject({ type: FailureType.LaunchFailed, nonRetryable: true });
      expect(failure.message).toMatch(message);
    },
  );

  it('fails fast when the service reports a status it does not know, and waits through NO_REPLICA', async () => {
    const f = await fleet();
    const { acts, sky } = setup({ healthy: () => false });
    const service = (status: 'unknown' | 'NO_REPLICA', statusText: string) => ({
      name: 'x',
      status,
      statusText,
      replicas: null,
      endpoint: null,
      replicaList: [],
    });
    sky.service = service('unknown', 'WARMING_UP');
    const failure = await failureOf(run(acts.awaitSupervisor, { domainId: f.ids.serve!, skyCheckEveryMs: 0 }));
    expect(failure.message).toMatch(/service haru-.*-serve has unknown status "WARMING_UP"/);
    sky.service = service('NO_REPLICA', 'NO_REPLICA');
    let polls = 0;
    const healthy = setup({ sky, healthy: () => ++polls > 20 });
    await expect(
      run(healthy.acts.awaitSupervisor, { domainId: f.ids.serve!, skyCheckEveryMs: 0 }),
    ).resolves.toMatchObject({
      models: ['llama'],
    });
  });

  it('keeps waiting through a failing sky status (the supervisor is the truth) and stops on an unauthorized supervisor', async () => {
    const f = await fleet();
    const { acts, sky, host } = setup();
    sky.failures.set('status', new SkyCommandError(['sky', 'status'], 'exit', 1, 'api server down'));
    host.failures.set(
      'status',
      ApplicationFailure.nonRetryable('supervisor refused the token', FailureType.Unauthorized),
    );
    const failure = await failureOf(run(acts.awaitSupervisor, { domainId: f.ids.west!, skyCheckEveryMs: 0 }));
    expect(failure.type).toBe(FailureType.Unauthorized);
    expect(sky.calls.map((c) => c.method)).toEqual(['status']);
  });
});

describe('resolveSupervisorUrl', () => {
  it('stores the address sky reports for the supervisor port while provisioning, with an event', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    const result = await run(acts.resolveSupervisorUrl, { domainId: f.ids.west! });
    expect(result).toMatchObject({ supervisorUrl: 'http://10.1.2.3:8701', source: 'sky' });
    expect(sky.calls).toEqual([{ method: 'endpoint', name: `haru-${f.slug}-west`, port: 21 }]);
    expect((await tdb.store.domains.get(f.ids.west!))!.supervisorUrl).toBe('http://10.1.2.3:8701');
    const events = await tdb.store.events.list(f.fleetId);
    expect(events.map((e) => e.type)).toContain('domain.supervisor_url');

    const served = await run(acts.resolveSupervisorUrl, { domainId: f.ids.serve! });
    expect(served.source).toBe('sky');
    expect(sky.calls.at(-1)).toEqual({ method: 'serveEndpoint', name: `haru-${f.slug}-serve` });
  });

  it('keeps a pinned URL without asking sky, and leaves the row alone once a teardown took over', async () => {
    const f = await fleet({ west: 'stopping' });
    const { acts, sky } = setup();
    const pinned = await tdb.store.domains.get(f.ids.serve!);
    await tdb.database.db
      .update(domainsTable)
      .set({ launch: { ...pinned!.launch!, pinSupervisorUrl: true } })
      .where(eq(domainsTable.id, f.ids.serve!));
    expect(await run(acts.resolveSupervisorUrl, { domainId: f.ids.serve! })).toMatchObject({
      supervisorUrl: 'http://127.0.0.1:22',
      source: 'layout',
    });
    expect(sky.calls).toEqual([]);

    const conflict = await failureOf(run(acts.resolveSupervisorUrl, { domainId: f.ids.west! }));
    expect(conflict.type).toBe(FailureType.StateConflict);
    expect((await tdb.store.domains.get(f.ids.west!))!.supervisorUrl).toBe('http://127.0.0.1:21');
  });

  it('fails non-retryably when the cluster is gone and retryably when sky fails', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    sky.reportedEndpoint = null;
    expect((await failureOf(run(acts.resolveSupervisorUrl, { domainId: f.ids.west! }))).type).toBe(
      FailureType.LaunchFailed,
    );
    sky.failures.set('endpoint', new SkyCommandError(['sky', 'status'], 'exit', 1, 'ApiServerConnectionError'));
    const failed = await failureOf(run(acts.resolveSupervisorUrl, { domainId: f.ids.west! }));
    expect(failed.type).toBe(FailureType.SkyCommandFailed);
    expect(failed.nonRetryable).toBe(false);
  });
});

describe('finishProvisioning', () => {
  it('marks a provisioning domain ready (clearing the polls that failed during the launch), or failed with the reason', async () => {
    const f = await fleet();
    const { acts } = setup();
    for (let i = 0; i < 5; i++) {
      await tdb.store.domains.recordPoll(f.ids.west!, { ok: false, at: new Date(), error: 'ECONNREFUSED' });
    }
    expect(await run(acts.finishProvisioning, { domainId: f.ids.west!, outcome: 'ready' })).toEqual({
      state: 'ready',
      changed: true,
    });
    expect(
      await run(acts.finishProvisioning, { domainId: f.ids.serve!, outcome: 'failed', reason: 'launch: boom' }),
    ).toEqual({
      state: 'failed',
      changed: true,
    });
    expect(await tdb.store.domains.get(f.ids.west!)).toMatchObject({ consecutiveFailures: 0, lastError: null });
    expect((await tdb.store.domains.get(f.ids.west!))!.lastSeenAt).not.toBeNull();
    expect((await tdb.store.domains.get(f.ids.serve!))!.lastError).toBe('launch: boom');
  });

  it('leaves a domain a teardown took over alone', async () => {
    const f = await fleet({ west: 'stopping' });
    const { acts } = setup();
    expect(await run(acts.finishProvisioning, { domainId: f.ids.west!, outcome: 'failed', reason: 'x' })).toEqual({
      state: 'stopping',
      changed: false,
    });
    expect(await stateOf(f.ids.west!)).toBe('stopping');
  });

  it('keeps a teardown that starts while a failed launch is being recorded: the row stays stopping', async () => {
    const f = await fleet();
    const teardown = setup().acts;
    // A store whose every read of the domain lets a teardown land right after it: a finish that read
    // the state and then wrote would overwrite the teardown's `stopping`.
    let tornDown = false;
    const store = {
      ...tdb.store,
      domains: {
        ...tdb.store.domains,
        async get(id: string) {
          const row = await tdb.store.domains.get(id);
          if (!tornDown && id === f.ids.west) {
            tornDown = true;
            await run(teardown.beginTeardown, { domainId: id });
          }
          return row;
        },
      },
    };
    const acts = createProvisioningActivities({
      store,
      supervisor: new FakeHost().client,
      now: () => new Date(),
      pollIntervalMs: 5,
    });
    await run(acts.finishProvisioning, {
      domainId: f.ids.west!,
      outcome: 'failed',
      reason: 'launch: ResourcesUnavailableError',
    });
    // Whichever came first, the teardown's `stopping` is what the row says now.
    if (!tornDown) await run(teardown.beginTeardown, { domainId: f.ids.west! });
    expect(await stateOf(f.ids.west!)).toBe('stopping');
    // The teardown ends it; a late failed finish of the provisioning changes nothing.
    expect(await run(acts.finishTeardown, { domainId: f.ids.west!, outcome: 'stopped' })).toEqual({
      state: 'stopped',
      changed: true,
    });
    expect(await run(acts.finishProvisioning, { domainId: f.ids.west!, outcome: 'failed', reason: 'late' })).toEqual({
      state: 'stopped',
      changed: false,
    });
    expect(await stateOf(f.ids.west!)).toBe('stopped');
  });
});

describe('teardown activities', () => {
  it('refuses the active domain and a domain an in-flight operation targets', async () => {
    const f = await fleet({ west: 'ready', east: 'ready' });
    const { acts } = setup();
    const active = await failureOf(run(acts.beginTeardown, { domainId: f.ids.east! }));
    expect(active.type).toBe(FailureType.InvalidTarget);
    expect(active.message).toMatch(/east is the active domain/);
    await tdb.store.operations.create({
      fleetId: f.fleetId,
      kind: 'promote',
      targetDomainId: f.ids.west!,
      reason: 'test',
      requestedBy: 'test',
    });
    const busy = await failureOf(run(acts.beginTeardown, { domainId: f.ids.west! }));
    expect(busy.message).toMatch(/in-flight promote operation/);
    expect(await stateOf(f.ids.east!)).toBe('ready');
    expect(await stateOf(f.ids.west!)).toBe('ready');
  });

  it('moves a serving domain to stopping, reports an already stopped one, and ends in stopped', async () => {
    const f = await fleet({ west: 'ready', serve: 'stopped' });
    const { acts } = setup();
    expect(await run(acts.beginTeardown, { domainId: f.ids.west! })).toMatchObject({
      state: 'stopping',
      wasServing: true,
    });
    expect(await stateOf(f.ids.west!)).toBe('stopping');
    expect(await run(acts.beginTeardown, { domainId: f.ids.serve! })).toMatchObject({
      state: 'stopped',
      wasServing: false,
    });
    expect(await run(acts.finishTeardown, { domainId: f.ids.west!, outcome: 'stopped' })).toEqual({
      state: 'stopped',
      changed: true,
    });
  });

  it('tears down for a replacement only a domain still failed, and refuses one that answered again', async () => {
    const f = await fleet({ west: 'ready', serve: 'failed' });
    const { acts } = setup();
    const recovered = await failureOf(run(acts.beginTeardown, { domainId: f.ids.west!, onlyIfFailed: true }));
    expect(recovered).toMatchObject({ type: FailureType.StateConflict, nonRetryable: true });
    expect(recovered.message).toMatch(/west is ready, no longer failed/);
    expect(await stateOf(f.ids.west!)).toBe('ready');
    expect(await run(acts.beginTeardown, { domainId: f.ids.serve!, onlyIfFailed: true })).toMatchObject({
      state: 'stopping',
      wasServing: false,
    });
    expect(await stateOf(f.ids.serve!)).toBe('stopping');
  });

  it('downs, stops or serve-downs by provider and mode, checks with sky that it took, and retries a failing sky command', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    const up: SkyCluster = {
      name: 'x',
      status: 'UP',
      statusText: 'UP',
      infra: null,
      resources: null,
      autostop: null,
      launched: null,
    };
    sky.cluster = up;
    expect(await run(acts.destroyDomain, { domainId: f.ids.west!, mode: 'down' })).toMatchObject({
      attempt: 1,
      result: 'down',
      purged: false,
      observed: { gone: true, status: null, checks: 1 },
    });
    sky.cluster = up;
    expect(await run(acts.destroyDomain, { domainId: f.ids.west!, mode: 'stop' })).toMatchObject({
      attempt: 1,
      result: 'stopped',
      observed: { gone: true, status: 'STOPPED' },
    });
    expect(await run(acts.destroyDomain, { domainId: f.ids.serve!, mode: 'stop' })).toMatchObject({
      attempt: 1,
      result: 'not_found',
      observed: { gone: true, status: null },
    });
    expect(sky.calls.map((c) => `${c.method} ${c.name}`)).toEqual([
      `down haru-${f.slug}-west`,
      `status haru-${f.slug}-west`,
      `stop haru-${f.slug}-west`,
      `status haru-${f.slug}-west`,
      `serveDown haru-${f.slug}-serve`,
      `serveStatus haru-${f.slug}-serve`,
    ]);
    const checked = (await tdb.store.events.list(f.fleetId, { limit: 500 })).filter(
      (e) => e.type === 'domain.teardown_checked',
    );
    expect(checked.map((e) => e.data)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          command: 'sky down',
          result: 'down',
          observed: expect.objectContaining({ gone: true }),
        }),
        expect.objectContaining({ command: 'sky stop', observed: expect.objectContaining({ status: 'STOPPED' }) }),
      ]),
    );
    sky.failures.set('down', new SkyCommandError(['sky', 'down'], 'timeout', null, '', '600000 ms'));
    const failure = await failureOf(run(acts.destroyDomain, { domainId: f.ids.west!, mode: 'down' }));
    expect(failure.type).toBe(FailureType.SkyCommandFailed);
    expect(failure.nonRetryable).toBe(false);
  });

  it('fails the destroy (retryably) when sky still lists the target after the command, and records what it saw', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    sky.sticky = true;
    sky.service = {
      name: 'x',
      status: 'SHUTTING_DOWN',
      statusText: 'SHUTTING_DOWN',
      replicas: null,
      endpoint: null,
      replicaList: [],
    };
    const failure = await failureOf(run(acts.destroyDomain, { domainId: f.ids.serve!, mode: 'down' }));
    expect(failure.type).toBe(FailureType.SkyCommandFailed);
    expect(failure.nonRetryable).toBe(false);
    expect(failure.message).toMatch(/still SHUTTING_DOWN .* after sky serve down/);
    expect(sky.calls.filter((c) => c.method === 'serveStatus').length).toBeGreaterThan(1);
    const [checked] = (await tdb.store.events.list(f.fleetId, { limit: 500 })).filter(
      (e) => e.type === 'domain.teardown_checked',
    );
    expect(checked?.data).toMatchObject({
      command: 'sky serve down',
      observed: { gone: false, status: 'SHUTTING_DOWN' },
    });
  });

  it('records a purged failed service as down and purged', async () => {
    const f = await fleet();
    const { acts, sky } = setup();
    sky.serveDownResult = 'purged';
    sky.service = {
      name: 'x',
      status: 'CONTROLLER_FAILED',
      statusText: 'CONTROLLER_FAILED',
      replicas: null,
      endpoint: null,
      replicaList: [],
    };
    expect(await run(acts.destroyDomain, { domainId: f.ids.serve!, mode: 'down' })).toMatchObject({
      result: 'down',
      purged: true,
      observed: { gone: true },
    });
  });
});
