import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { SecretNotSetError, SkyCommandError } from '../drivers/errors';
import type { SkyCli } from '../drivers/sky';
import { type ClusterStatus, type ServiceStatus, stripAnsi } from '../drivers/sky-output';
import { renderDomainYaml, RenderError, skyNameFor, urlPort } from '../drivers/sky-yaml';
import { describeCause } from '../lib/error-cause';
import type { Domain, FleetSnapshot } from '../schemas/entities';
import type { DomainState, Provider } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import {
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_SKY_POLL_INTERVAL_MS,
  DEFAULT_TEARDOWN_CHECK_WITHIN_MS,
  type ActivityDeps,
} from './deps';
import { fetch as undiciFetch } from 'undici';
import { SUPERVISOR_TLS_SECRETS } from '../schemas/layout';
import { SupervisorAccessError, type SupervisorConnection } from '../clients/supervisor-access';
import { pause } from './step-budget';
import { cancellation, currentAttempt, loadTarget, modelNamesOf, waitUntil } from './support';

/** The environment variable the supervisor reads its bearer token from (passed with `--secret`). */
export const SUPERVISOR_TOKEN_ENV = 'HARU_SUPERVISOR_TOKEN';

/** A skypilot/skyserve domain as the provisioning workflows need it. */
export interface ProvisioningTarget {
  domainId: string;
  fleetId: string;
  slug: string;
  provider: Exclude<Provider, 'static'>;
  /** The SkyPilot cluster or SkyServe service name. */
  skyName: string;
  isActive: boolean;
  policy: FleetPolicy;
  inferenceSlotCount: number;
  trainingSlotCount: number;
}

export interface BeginTeardownResult extends ProvisioningTarget {
  /** `stopped` when there was nothing left to tear down. */
  state: 'stopping' | 'stopped';
  /** Whether the supervisor was answering (ready/degraded): worth a graceful stop of training first. */
  wasServing: boolean;
}

/** What `sky` reported about a torn-down cluster or service (recorded on the `domain.teardown_checked` event). */
export interface TeardownObservation {
  /** No longer listed (or, after a stop, listed as STOPPED). */
  gone: boolean;
  /** The status `sky` printed at the last check; null when it no longer lists the target. */
  status: string | null;
  /** How many status reads it took. */
  checks: number;
  /** When the last check was made. */
  at: string;
}

/** Cluster statuses after which a launch will not come up by waiting. */
const CLUSTER_DOWN_STATUSES: readonly ClusterStatus[] = ['STOPPED', 'AUTOSTOPPING', 'UNHEALTHY'];
/** Service statuses after which a `sky serve up` will not come up by waiting. */
const SERVICE_DOWN_STATUSES: readonly ServiceStatus[] = [
  'FAILED',
  'CONTROLLER_FAILED',
  'FAILED_CLEANUP',
  'SHUTTING_DOWN',
];

const invalidTarget = (message: string) => ApplicationFailure.nonRetryable(message, FailureType.InvalidTarget);

/** Last line of a chunk of CLI output, for heartbeat details (what a stuck launch was doing). */
const lastLine = (chunk: string) => stripAnsi(chunk).trim().split('\n').at(-1)?.slice(0, 200) ?? '';

/**
 * Provisioning activities: bring a skypilot/skyserve domain's machines up or down through the `sky` CLI
 * and record the domain's lifecycle (`provisioning -> ready | failed`, `stopping -> stopped`). Every one
 * is safe to repeat: state changes are guarded transitions, a repeated launch reuses the cluster, a
 * repeated down finds nothing and says so.
 */
export function createProvisioningActivities(deps: ActivityDeps) {
  const { store, supervisor } = deps;
  const intervalMs = deps.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const httpFetch = deps.fetch ?? undiciFetch;

  /** A domain's supervisor settings that cannot work, as the non-retryable failure the client also throws. */
  function misconfigured<T>(domain: Domain, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (!(err instanceof SupervisorAccessError)) throw err;
      throw ApplicationFailure.nonRetryable(err.message, FailureType.SupervisorMisconfigured, { domain: domain.slug });
    }
  }

  /** The token the launched host's supervisor will require. */
  const supervisorTokenOf = (domain: Domain) => misconfigured(domain, () => deps.supervisorAccess?.tokenFor(domain));
  /** How `/healthz` reaches the domain's supervisor: its CA and TLS server name, as the client's calls do. */
  const connectionOf = (domain: Domain): SupervisorConnection | undefined =>
    misconfigured(domain, () => deps.supervisorAccess?.connect(domain));

  /**
   * The secrets carrying a certificate issued now for the domain's `supervisor.serverName` (base64 PEM, see
   * SUPERVISOR_TLS_SECRETS) and what is known of it; none for a domain that does not ask for one.
   */
  function certificateFor(domain: Domain): {
    secrets: Record<string, string>;
    issued?: { serverName: string; serial: string; notAfter: string; fingerprint256: string };
  } {
    const serverName = domain.supervisor?.serverName;
    if (!domain.supervisor?.issueCertificate || !serverName) return { secrets: {} };
    if (!deps.supervisorCertificates) {
      throw ApplicationFailure.nonRetryable(
        `domain ${domain.slug}: supervisor.issueCertificate needs the supervisor CA on the worker: set ` +
          'HARU_SUPERVISOR_CA_FILE and HARU_SUPERVISOR_CA_KEY_FILE',
        FailureType.SupervisorMisconfigured,
        { domain: domain.slug },
      );
    }
    const cert = deps.supervisorCertificates.issue(serverName, deps.now());
    const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
    return {
      secrets: { [SUPERVISOR_TLS_SECRETS.cert]: b64(cert.certPem), [SUPERVISOR_TLS_SECRETS.key]: b64(cert.keyPem) },
      issued: {
        serverName,
        serial: cert.serial,
        notAfter: cert.notAfter.toISOString(),
        fingerprint256: cert.fingerprint256,
      },
    };
  }
  const checkWithinMs = deps.teardownCheckWithinMs ?? DEFAULT_TEARDOWN_CHECK_WITHIN_MS;

  function requireSky(): SkyCli {
    if (!deps.sky) {
      throw ApplicationFailure.nonRetryable(
        'this worker has no sky CLI configured: skypilot and skyserve domains cannot be provisioned here',
        FailureType.ProvisioningUnavailable,
      );
    }
    return deps.sky;
  }

  async function loadProvisionable(domainId: string): Promise<{ domain: Domain; fleet: FleetSnapshot }> {
    const domain = await store.domains.get(domainId);
    if (!domain) throw invalidTarget(`domain ${domainId} does not exist`);
    const fleet = await store.fleets.snapshot(domain.fleetId);
    if (!fleet) throw invalidTarget(`fleet ${domain.fleetId} of domain ${domain.slug} does not exist`);
    if (domain.provider === 'static') {
      throw invalidTarget(`domain ${domain.slug} is static: its machines are not managed by Haru`);
    }
    return { domain, fleet };
  }

  function targetOf(domain: Domain, fleet: FleetSnapshot): ProvisioningTarget {
    const slots = fleet.domains.find((d) => d.id === domain.id)?.slots ?? [];
    return {
      domainId: domain.id,
      fleetId: fleet.id,
      slug: domain.slug,
      provider: domain.provider as ProvisioningTarget['provider'],
      skyName: skyNameFor(fleet.slug, domain.slug),
      isActive: fleet.activeDomainId === domain.id,
      policy: fleet.policy,
      inferenceSlotCount: slots.filter((s) => s.kind === 'inference').length,
      trainingSlotCount: slots.filter((s) => s.kind === 'training').length,
    };
  }

  async function event(domain: Domain, type: string, message: string, data: Record<string, unknown> = {}) {
    await store.events.append({ fleetId: domain.fleetId, domainId: domain.id, type, message, data });
  }

  /**
   * Moves the domain `from` one of the expected states to `to` (one guarded UPDATE), unless it is already
   * at `to`; a lost race re-reads and accepts `to` only.
   */
  async function moveTo(
    domain: Domain,
    to: DomainState,
    from: readonly DomainState[],
    lastError?: string | null,
  ): Promise<Domain> {
    if (domain.state === to) return domain;
    const moved = await store.domains.transition(domain.id, to, {
      from,
      ...(lastError === undefined ? {} : { lastError }),
    });
    if (moved) return moved;
    const now = await store.domains.get(domain.id);
    if (now?.state === to) return now;
    throw ApplicationFailure.nonRetryable(
      `domain ${domain.slug} could not move ${domain.state} -> ${to} (it is ${now?.state ?? 'gone'})`,
      FailureType.StateConflict,
    );
  }

  /** Heartbeats every few seconds (and on every line of output) while `fn` runs a long `sky` command. */
  async function heartbeating<T>(what: string, fn: (onOutput: (chunk: string) => void) => Promise<T>): Promise<T> {
    const ctx = Context.current();
    let last = '';
    const beat = () => ctx.heartbeat({ waitingFor: what, lastOutput: last });
    beat();
    const timer = setInterval(beat, 5_000);
    try {
      return await fn((chunk) => {
        last = lastLine(chunk) || last;
        beat();
      });
    } finally {
      clearInterval(timer);
    }
  }

  /** The activity's cancellation instead of a SkyCommandError for a command we aborted. */
  function skyFailure(err: unknown, type: FailureType, retryable: boolean): unknown {
    if (err instanceof SkyCommandError && err.reason === 'aborted') return cancellation().reason ?? err;
    if (!(err instanceof SkyCommandError)) return err;
    const details = { command: err.command, exitCode: err.exitCode, reason: err.reason, stderr: err.stderr };
    return retryable
      ? ApplicationFailure.retryable(err.message, type, details)
      : ApplicationFailure.nonRetryable(err.message, type, details);
  }

  return {
    /**
     * Starts provisioning a skypilot/skyserve domain: a `failed` or `stopped` domain moves to
     * `provisioning`; one already `provisioning` is picked up again (a retry or a restarted workflow).
     * Refuses (non-retryable InvalidTarget) a static domain, one without a launch spec, and one that is
     * ready, degraded or being torn down.
     */
    async beginProvisioning(input: { domainId: string }): Promise<ProvisioningTarget> {
      const { domain, fleet } = await loadProvisionable(input.domainId);
      try {
        renderDomainYaml({ domain, fleetSlug: fleet.slug });
      } catch (err) {
        if (err instanceof RenderError) throw invalidTarget(err.message);
        throw err;
      }
      if (domain.state === 'ready' || domain.state === 'degraded') {
        throw invalidTarget(`domain ${domain.slug} is ${domain.state}: tear it down before provisioning it again`);
      }
      if (domain.state === 'stopping') throw invalidTarget(`domain ${domain.slug} is being torn down`);
      const moved = await moveTo(domain, 'provisioning', ['failed', 'stopped'], null);
      if (moved !== domain) {
        await event(domain, 'domain.provisioning', `domain ${domain.slug}: ${domain.state} -> provisioning`, {
          from: domain.state,
        });
      }
      log.info('provisioning domain', { domainId: domain.id, provider: domain.provider });
      return targetOf(domain, fleet);
    },

    /**
     * `sky launch` (skypilot) or `sky serve up` (skyserve) of the domain's rendered YAML, the domain's supervisor
     * token (its layout's `tokenEnv`/`tokenFile`, else the fleet-wide one) passed as `--secret
     * HARU_SUPERVISOR_TOKEN` through the `sky` process's environment, and for a `supervisor.issueCertificate`
     * domain a certificate issued now for its `serverName` with its key (`--secret HARU_SUPERVISOR_TLS_CERT_B64`,
     * `…_KEY_B64`; the key exists only in that process's environment and on the host), recorded as a
     * `domain.certificate_issued` event (serial, expiry, fingerprint). Heartbeats the CLI's last output line
     * while it runs; cancellation kills the command. A failed or timed-out launch throws non-retryable
     * LaunchFailed carrying the command and its capped stderr; an unset or unreadable token source, or a
     * certificate to issue without the CA's key, non-retryable SupervisorMisconfigured.
     */
    async launchDomain(input: { domainId: string; timeoutMs: number }): Promise<{
      attempt: number;
      skyName: string;
      provider: string;
      certificate?: { serverName: string; serial: string; notAfter: string; fingerprint256: string };
    }> {
      const sky = requireSky();
      const { domain, fleet } = await loadProvisionable(input.domainId);
      const skyName = skyNameFor(fleet.slug, domain.slug);
      const yaml = renderDomainYaml({ domain, fleetSlug: fleet.slug });
      const token = supervisorTokenOf(domain);
      const certificate = certificateFor(domain);
      const secrets: Record<string, string> = {
        ...(token ? { [SUPERVISOR_TOKEN_ENV]: token } : {}),
        ...certificate.secrets,
      };
      const verb = domain.provider === 'skyserve' ? 'sky serve up' : 'sky launch';
      try {
        await heartbeating(`${verb} ${skyName}`, (onOutput) => {
          const opts = { signal: cancellation(), onOutput, timeoutMs: input.timeoutMs };
          const launch = { name: skyName, yaml, secrets, envSecrets: domain.launch?.secrets };
          return domain.provider === 'skyserve' ? sky.serveUp(launch, opts) : sky.launch(launch, opts);
        });
      } catch (err) {
        if (err instanceof SecretNotSetError)
          throw ApplicationFailure.nonRetryable(err.message, FailureType.LaunchFailed);
        throw skyFailure(err, FailureType.LaunchFailed, false);
      }
      log.info('domain launched', { domainId: domain.id, skyName, provider: domain.provider });
      const issued = certificate.issued;
      if (issued) {
        await event(
          domain,
          'domain.certificate_issued',
          `domain ${domain.slug}: supervisor certificate for ${issued.serverName} issued, valid until ${issued.notAfter}`,
          issued,
        );
      }
      return { attempt: currentAttempt(), skyName, provider: domain.provider, ...(issued && { certificate: issued }) };
    },

    /**
     * Points the domain at the address SkyPilot exposes its supervisor on, unless the launch spec pins the
     * layout's URL (`pinSupervisorUrl`). skypilot: `sky status --endpoint PORT CLUSTER` for the supervisor
     * URL's port; skyserve: `sky serve status --endpoint SERVICE` when the load balancer serves the
     * supervisor's port (otherwise the layout's URL stays). The row is written only while the domain is
     * still `provisioning` (non-retryable StateConflict otherwise: a teardown took over). A failing or
     * unreadable `sky` answer is retryable SkyCommandFailed; a cluster or service that is gone is
     * non-retryable LaunchFailed.
     */
    async resolveSupervisorUrl(input: {
      domainId: string;
    }): Promise<{ attempt: number; supervisorUrl: string; source: 'layout' | 'sky' }> {
      const { domain, fleet } = await loadProvisionable(input.domainId);
      const keep = { attempt: currentAttempt(), supervisorUrl: domain.supervisorUrl, source: 'layout' as const };
      if (!domain.launch || domain.launch.pinSupervisorUrl) return keep;
      const port = urlPort(domain.supervisorUrl);
      if (domain.provider === 'skyserve' && (domain.launch.service?.port ?? port) !== port) return keep;
      const sky = requireSky();
      const skyName = skyNameFor(fleet.slug, domain.slug);
      // `sky status --endpoint` prints `host:port` for a VM: the supervisor there speaks what the layout's URL says.
      const scheme = new URL(domain.supervisorUrl).protocol === 'https:' ? 'https' : 'http';
      let reported: string | null;
      try {
        reported =
          domain.provider === 'skyserve'
            ? await sky.serveEndpoint(skyName, { signal: cancellation() })
            : await sky.endpoint(skyName, port, { signal: cancellation(), scheme });
      } catch (err) {
        throw skyFailure(err, FailureType.SkyCommandFailed, true);
      }
      if (!reported) {
        throw ApplicationFailure.nonRetryable(
          `${domain.provider === 'skyserve' ? 'service' : 'cluster'} ${skyName} is gone right after its launch`,
          FailureType.LaunchFailed,
        );
      }
      const result = { attempt: currentAttempt(), supervisorUrl: reported, source: 'sky' as const };
      if (reported === domain.supervisorUrl) return result;
      const moved = await store.domains.setSupervisorUrl(domain.id, reported, { whileIn: ['provisioning'] });
      if (!moved) {
        const now = await store.domains.get(domain.id);
        throw ApplicationFailure.nonRetryable(
          `domain ${domain.slug} is ${now?.state ?? 'gone'}, not provisioning: its supervisor URL was left alone`,
          FailureType.StateConflict,
        );
      }
      log.info('supervisor address from sky', { domainId: domain.id, from: domain.supervisorUrl, to: reported });
      await event(domain, 'domain.supervisor_url', `domain ${domain.slug}: supervisor at ${reported} (from sky)`, {
        from: domain.supervisorUrl,
        to: reported,
      });
      return result;
    },

    /**
     * Waits until the domain's supervisor answers `/healthz` and `/v1/status` reports every model of the
     * layout (in a known state). Every `skyCheckEveryMs` it also asks `sky` whether the cluster (or
     * service) still exists, and fails fast with non-retryable LaunchFailed when it is gone, stopped or
     * failed. Unauthorized (a token mismatch) fails at once; an unreachable supervisor is waited for.
     */
    async awaitSupervisor(input: {
      domainId: string;
      skyCheckEveryMs?: number;
    }): Promise<{ attempt: number; models: string[] }> {
      const { domain, fleet } = await loadProvisionable(input.domainId);
      const target = await loadTarget(deps, domain.id);
      const names = modelNamesOf(target.inference);
      const url = domain.supervisorUrl;
      const skyName = skyNameFor(fleet.slug, domain.slug);
      const checkEvery = input.skyCheckEveryMs ?? 15_000;
      let lastSkyCheck = deps.now().getTime();
      await waitUntil(async () => {
        if (deps.sky && deps.now().getTime() - lastSkyCheck >= checkEvery) {
          lastSkyCheck = deps.now().getTime();
          await assertStillLaunched(deps.sky, domain.provider, skyName);
        }
        const health = await healthz(url, connectionOf(domain));
        if (health) return { done: false, waitingFor: `supervisor ${url}/healthz: ${health}` };
        let status;
        try {
          status = await supervisor.status(domain, { signal: cancellation() });
        } catch (err) {
          if (err instanceof ApplicationFailure && err.type === FailureType.SupervisorUnreachable) {
            return { done: false, waitingFor: `supervisor /v1/status: ${err.message}` };
          }
          throw err;
        }
        const missing = names.filter((n) => !status.models.some((m) => m.name === n && m.state !== 'unknown'));
        return missing.length === 0
          ? { done: true, value: true }
          : { done: false, waitingFor: `models not up on the supervisor: ${missing.join(', ')}` };
      }, intervalMs);
      return { attempt: currentAttempt(), models: names };
    },

    /**
     * Ends provisioning: `ready` moves the domain provisioning -> ready and resets its poll bookkeeping (the
     * supervisor just answered); `failed` moves it to failed with
     * the reason in lastError, but only while it is still provisioning (a teardown that took over keeps
     * its `stopping`). Returns the state the domain is in afterwards. Appends an event either way.
     */
    async finishProvisioning(input: {
      domainId: string;
      outcome: 'ready' | 'failed';
      reason?: string;
    }): Promise<{ state: DomainState; changed: boolean }> {
      const to = input.outcome;
      // Only from `provisioning`, in the UPDATE itself: a teardown that took over keeps its `stopping`.
      const moved = await store.domains.transition(input.domainId, to, {
        from: ['provisioning'],
        lastError: to === 'failed' ? (input.reason ?? 'provisioning failed') : null,
      });
      if (!moved) {
        const now = await store.domains.get(input.domainId);
        if (!now) throw invalidTarget(`domain ${input.domainId} does not exist`);
        return { state: now.state, changed: false };
      }
      const domain = moved;
      if (to === 'ready') {
        // The polls that failed while the host was launching say nothing about it now: it just answered.
        await store.domains.recordPoll(domain.id, { ok: true, at: deps.now() });
        log.info('domain provisioned', { domainId: domain.id });
        await event(domain, 'domain.provisioned', `domain ${domain.slug}: provisioning -> ready`, {
          from: 'provisioning',
        });
      } else {
        log.warn('domain provisioning failed', { domainId: domain.id, reason: input.reason });
        await event(
          domain,
          'domain.provision_failed',
          `domain ${domain.slug}: provisioning failed: ${input.reason ?? ''}`,
          {
            from: 'provisioning',
            reason: input.reason ?? null,
          },
        );
      }
      return { state: to, changed: true };
    },

    /**
     * Records, as a `domain.replacement` event, that the fleet monitor started a step of replacing a
     * standby that stayed failed (`replaceFailedStandby`): its teardown, or the provisioning after it.
     */
    async recordStandbyReplacement(input: {
      domainId: string;
      step: 'teardown' | 'provision';
      reason: string;
    }): Promise<void> {
      const domain = await store.domains.get(input.domainId);
      if (!domain) throw invalidTarget(`domain ${input.domainId} does not exist`);
      const what = input.step === 'teardown' ? 'tearing down the failed standby' : 'provisioning its replacement';
      log.warn('replacing a failed standby', { domainId: domain.id, step: input.step, reason: input.reason });
      await event(domain, 'domain.replacement', `domain ${domain.slug}: ${what} (${input.reason})`, {
        step: input.step,
        reason: input.reason,
      });
    },

    /**
     * Starts tearing a domain down: moves it to `stopping` (or reports `stopped` when it already is).
     * Refuses (non-retryable InvalidTarget) the fleet's active domain, a static domain, and a domain an
     * in-flight operation targets.
     */
    async beginTeardown(input: { domainId: string; onlyIfFailed?: boolean }): Promise<BeginTeardownResult> {
      const { domain, fleet } = await loadProvisionable(input.domainId);
      const target = targetOf(domain, fleet);
      if (target.isActive) {
        throw invalidTarget(`domain ${domain.slug} is the active domain of fleet ${fleet.slug}; promote another first`);
      }
      const op = fleet.inFlightOperation;
      if (op && (op.targetDomainId === domain.id || op.fromDomainId === domain.id)) {
        throw invalidTarget(`domain ${domain.slug} is part of in-flight ${op.kind} operation ${op.id}`);
      }
      if (domain.state === 'stopped') return { ...target, state: 'stopped', wasServing: false };
      if (input.onlyIfFailed && domain.state !== 'failed' && domain.state !== 'stopping') {
        throw ApplicationFailure.nonRetryable(
          `domain ${domain.slug} is ${domain.state}, no longer failed: not torn down`,
          FailureType.StateConflict,
        );
      }
      const wasServing = domain.state === 'ready' || domain.state === 'degraded';
      // A replacement moves only a domain still failed, in the UPDATE itself (it may answer again meanwhile).
      const from: DomainState[] = input.onlyIfFailed ? ['failed'] : ['provisioning', 'ready', 'degraded', 'failed'];
      const moved = await moveTo(domain, 'stopping', from);
      if (moved !== domain) {
        await event(domain, 'domain.teardown', `domain ${domain.slug}: ${domain.state} -> stopping`, {
          from: domain.state,
        });
      }
      log.info('tearing domain down', { domainId: domain.id, from: domain.state });
      return { ...target, state: 'stopping', wasServing };
    },

    /**
     * `sky down` / `sky stop` (skypilot) or `sky serve down` (skyserve; a failed service is purged, see
     * SkyCli.serveDown), then asks `sky` until the cluster is gone (stopped, for a stop) or the service is
     * gone, and appends a `domain.teardown_checked` event with what it saw. A target that no longer exists
     * counts as done (`not_found`). A failing command, or a target still there teardownCheckWithinMs after
     * the command, is a retryable SkyCommandFailed within the step budget: never a silent success.
     */
    async destroyDomain(input: { domainId: string; mode: 'down' | 'stop' }): Promise<{
      attempt: number;
      result: 'down' | 'stopped' | 'not_found';
      purged: boolean;
      observed: TeardownObservation;
    }> {
      const sky = requireSky();
      const { domain, fleet } = await loadProvisionable(input.domainId);
      const skyName = skyNameFor(fleet.slug, domain.slug);
      const serve = domain.provider === 'skyserve';
      const verb = serve ? 'sky serve down' : input.mode === 'stop' ? 'sky stop' : 'sky down';
      try {
        const outcome = await heartbeating(`${verb} ${skyName}`, (onOutput) => {
          const opts = { signal: cancellation(), onOutput };
          if (serve) return sky.serveDown(skyName, opts);
          return input.mode === 'stop' ? sky.stop(skyName, opts) : sky.down(skyName, opts);
        });
        const purged = outcome === 'purged';
        const result = purged ? 'down' : outcome;
        const observed = await checkTornDown(
          sky,
          serve ? 'service' : input.mode === 'stop' ? 'stopped' : 'cluster',
          skyName,
        );
        const data = { command: verb, name: skyName, result, purged, observed };
        await event(
          domain,
          'domain.teardown_checked',
          observed.gone
            ? `domain ${domain.slug}: ${verb} ${skyName} done, sky reports it ${observed.status ?? 'gone'}`
            : `domain ${domain.slug}: ${skyName} still ${observed.status} after ${verb}`,
          data,
        );
        if (!observed.gone) {
          throw ApplicationFailure.retryable(
            `${skyName} is still ${observed.status} ${Math.round(checkWithinMs / 1000)} s after ${verb}`,
            FailureType.SkyCommandFailed,
            data,
          );
        }
        return { attempt: currentAttempt(), result, purged, observed };
      } catch (err) {
        throw skyFailure(err, FailureType.SkyCommandFailed, true);
      }
    },

    /** Ends a teardown: stopping -> stopped, or stopping -> failed with the reason. Appends an event. */
    async finishTeardown(input: {
      domainId: string;
      outcome: 'stopped' | 'failed';
      reason?: string;
    }): Promise<{ state: DomainState; changed: boolean }> {
      // Only from `stopping`, in the UPDATE itself.
      const domain = await store.domains.transition(input.domainId, input.outcome, {
        from: ['stopping'],
        lastError: input.outcome === 'failed' ? (input.reason ?? 'teardown failed') : null,
      });
      if (!domain) {
        const now = await store.domains.get(input.domainId);
        if (!now) throw invalidTarget(`domain ${input.domainId} does not exist`);
        return { state: now.state, changed: false };
      }
      const message =
        input.outcome === 'stopped'
          ? `domain ${domain.slug}: stopping -> stopped`
          : `domain ${domain.slug}: teardown failed: ${input.reason ?? ''}`;
      await event(domain, input.outcome === 'stopped' ? 'domain.stopped' : 'domain.teardown_failed', message, {
        from: 'stopping',
        reason: input.reason ?? null,
      });
      return { state: input.outcome, changed: true };
    },
  };

  /**
   * Asks `sky` (every skyPollIntervalMs, for up to teardownCheckWithinMs) whether a torn-down target is
   * gone: a cluster or service no longer listed, or for a stop a cluster listed as STOPPED. A service in
   * SHUTTING_DOWN is still there (SkyServe terminates replicas after `sky serve down` returns).
   */
  async function checkTornDown(
    sky: SkyCli,
    kind: 'cluster' | 'stopped' | 'service',
    name: string,
  ): Promise<TeardownObservation> {
    const ctx = Context.current();
    const until = deps.now().getTime() + checkWithinMs;
    const pollMs = deps.skyPollIntervalMs ?? DEFAULT_SKY_POLL_INTERVAL_MS;
    for (let checks = 1; ; checks++) {
      const signal = cancellation();
      const status =
        kind === 'service'
          ? ((await sky.serveStatus(name, { signal }))?.statusText ?? null)
          : ((await sky.status(name, { signal, refresh: true }))?.statusText ?? null);
      const gone = status === null || (kind === 'stopped' && status === 'STOPPED');
      const observation = { gone, status, checks, at: deps.now().toISOString() };
      if (gone || deps.now().getTime() + pollMs > until) return observation;
      ctx.heartbeat({ waitingFor: `${name} to go (sky reports ${status})` });
      await pause(pollMs);
    }
  }

  /** Null when `/healthz` answers 2xx; otherwise why not. */
  async function healthz(url: string, connection: SupervisorConnection | undefined): Promise<string | null> {
    const signal = AbortSignal.any([cancellation(), AbortSignal.timeout(5_000)]);
    try {
      const target = new URL('healthz', url.endsWith('/') ? url : `${url}/`);
      const res = await httpFetch(target, { signal, dispatcher: connection?.dispatcher });
      await res.body?.cancel().catch(() => undefined);
      return res.ok ? null : `HTTP ${res.status}`;
    } catch (err) {
      if (cancellation().aborted) throw cancellation().reason ?? err;
      return describeCause(err);
    }
  }

  /**
   * Throws LaunchFailed when the cluster or service is gone, stopped, stopping, unhealthy or failed, or in a
   * status this reader does not know (named with the text `sky` printed: Haru cannot tell whether it is
   * coming up, so it says so instead of waiting out the ready timeout). A failing `sky` call only warns.
   */
  async function assertStillLaunched(sky: SkyCli, provider: Provider, name: string): Promise<void> {
    const launchFailed = (what: string) =>
      ApplicationFailure.nonRetryable(`${what} while waiting for its supervisor`, FailureType.LaunchFailed);
    try {
      if (provider === 'skyserve') {
        const service = await sky.serveStatus(name, { signal: cancellation() });
        if (!service) throw launchFailed(`service ${name} is gone`);
        if (service.status === 'unknown')
          throw launchFailed(`service ${name} has unknown status "${service.statusText}"`);
        if (SERVICE_DOWN_STATUSES.includes(service.status)) throw launchFailed(`service ${name} is ${service.status}`);
        return;
      }
      const cluster = await sky.status(name, { signal: cancellation() });
      if (!cluster) throw launchFailed(`cluster ${name} is gone`);
      if (cluster.status === 'unknown')
        throw launchFailed(`cluster ${name} has unknown status "${cluster.statusText}"`);
      if (CLUSTER_DOWN_STATUSES.includes(cluster.status)) throw launchFailed(`cluster ${name} is ${cluster.status}`);
    } catch (err) {
      if (err instanceof SkyCommandError && err.reason !== 'aborted') {
        log.warn('sky status failed while waiting for a supervisor', { name, error: err.message });
        return;
      }
      throw skyFailure(err, FailureType.LaunchFailed, false);
    }
  }
}
