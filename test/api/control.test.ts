import { WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { FleetSnapshot } from '../../schemas/entities';
import { runCli } from '../support/cli';
import { call, type Harness, startHarness, twoDomainLayout, uniqueSlug } from './support/harness';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';

/** Control routes against the real Temporal dev server (no worker: workflows are started and signalled, not run). */
describe('control routes', () => {
  let upstream: FakeUpstream;
  let h: Harness;
  beforeAll(async () => {
    upstream = await startFakeUpstream('east');
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  const seed = () => h.seed(twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url }));
  const domain = (fleet: FleetSnapshot, slug: string) => fleet.domains.find((d) => d.slug === slug)!;
  const post = (path: string, body?: unknown) => call(`${h.url}${path}`, { method: 'POST', body: body ?? {} });
  const describeWorkflow = (id: string) => h.temporal.client.workflow.getHandle(id).describe();
  /** The arguments the workflow's first run was started with. */
  const startArgs = async (id: string) => {
    const history = await h.temporal.client.workflow.getHandle(id).fetchHistory();
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    return (started?.input?.payloads ?? []).map((p) => defaultPayloadConverter.fromPayload(p));
  };
  /** Terminates the workflow's run (as if it had died while its row stays in flight); returns its run id. */
  const loseRun = async (id: string) => {
    const handle = h.temporal.client.workflow.getHandle(id);
    const { runId } = await handle.describe();
    await handle.terminate('run lost');
    return runId;
  };
  /** The run id and status of the workflow's latest run. */
  const latestRun = async (id: string) => {
    const { runId, status } = await describeWorkflow(id);
    return { runId, status: status.name };
  };

  describe('GET /v1/fleets', () => {
    it('lists fleets and reads one by slug or UUID; an unknown fleet is 404 fleet_not_found', async () => {
      const fleet = await seed();
      const list = await call(`${h.url}/v1/fleets`);
      expect(list.status).toBe(200);
      expect(list.body.fleets.map((f: FleetSnapshot) => f.slug)).toContain(fleet.slug);
      for (const ref of [fleet.slug, fleet.id]) {
        const one = await call(`${h.url}/v1/fleets/${ref}`);
        expect(one.status).toBe(200);
        expect(one.body).toMatchObject({ id: fleet.id, slug: fleet.slug, activeDomainId: domain(fleet, 'east').id });
      }
      const missing = await call(`${h.url}/v1/fleets/${uniqueSlug('missing')}`);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ error: { code: 'fleet_not_found', message: expect.any(String) } });
    });
  });

  describe('POST /promote', () => {
    it('inserts the operation, starts promotionWorkflow with the derived id, and joins an identical request', async () => {
      const fleet = await seed();
      const west = domain(fleet, 'west');
      const first = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west', reason: 'drill' });
      expect(first.status).toBe(202);
      expect(first.body.status).toBe('accepted');
      const op = first.body.operation;
      expect(op).toMatchObject({ fleetId: fleet.id, kind: 'promote', targetDomainId: west.id, reason: 'drill' });
      expect(op.workflowId).toBe(`haru/${fleet.id}/op/${op.id}`);
      const wf = await describeWorkflow(op.workflowId);
      expect(wf.type).toBe('promotionWorkflow');
      expect(wf.taskQueue).toBe(h.config.HARU_TASK_QUEUE);
      expect(await startArgs(op.workflowId)).toEqual([
        { fleetId: fleet.id, operationId: op.id, targetDomainId: west.id, reason: 'drill' },
      ]);
      expect(await wf.memo).toEqual({ reason: 'drill', requestedBy: 'api' });

      const again = await post(`/v1/fleets/${fleet.id}/promote`, { targetDomainId: west.id });
      expect(again.status).toBe(202);
      expect(again.body.status).toBe('joined');
      expect(again.body.operation.id).toBe(op.id);
    });

    it('joins a re-posted promote whose run closed without running it again; an abort then closes the row', async () => {
      const fleet = await seed();
      const first = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      const { workflowId } = first.body.operation;
      const runId = await loseRun(workflowId);
      const again = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      expect(again.status).toBe(202);
      expect(again.body).toMatchObject({ status: 'joined', operation: { id: first.body.operation.id } });
      expect(await latestRun(workflowId)).toEqual({ runId, status: 'TERMINATED' });
      // The way out is an abort: with no run to signal, the API closes the row itself.
      const abort = await post(`/v1/fleets/${fleet.slug}/operations/${first.body.operation.id}/abort`);
      expect(abort.status).toBe(200);
      expect(abort.body).toMatchObject({ state: 'cancelled' });
    });

    it('answers 200 already_active with the route revision when the target is the active domain', async () => {
      const fleet = await seed();
      const res = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'east' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        status: 'already_active',
        routeRevision: fleet.routeRevision,
        activeDomainId: fleet.activeDomainId,
      });
    });

    it('answers 409 operation_conflict when a different operation is in flight', async () => {
      const fleet = await seed();
      const demote = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'west' });
      expect(demote.status).toBe(202);
      const res = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('operation_conflict');
      expect(res.body.error.message).toContain(demote.body.operation.id);
    });

    it('answers 422 invalid_target for a domain outside the fleet, a failed domain, or one with no inference models', async () => {
      const fleet = await seed();
      const other = await seed();
      const outside = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: domain(other, 'west').id });
      expect(outside.status).toBe(422);
      expect(outside.body.error.code).toBe('invalid_target');
      expect((await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'nowhere' })).status).toBe(422);

      await h.store.domains.transition(domain(fleet, 'west').id, 'failed');
      const failed = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      expect(failed.status).toBe(422);
      expect(failed.body.error.message).toMatch(/failed/);

      const layout = twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url });
      layout.domains[1]!.slots = [{ kind: 'training', gpuIndex: 0, command: ['true'], checkpointDir: '/tmp/x' }];
      const trainingOnly = await h.seed(layout);
      const none = await post(`/v1/fleets/${trainingOnly.slug}/promote`, { targetDomainId: 'west' });
      expect(none.status).toBe(422);
      expect(none.body.error.message).toMatch(/no inference models/);
      expect((await h.store.operations.list(fleet.id)).length).toBe(0);
    });

    it('answers 400 for an unknown key or a missing target, 413 over 16 KiB, 404 for an unknown fleet', async () => {
      const fleet = await seed();
      const extra = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west', force: true });
      expect(extra.status).toBe(400);
      expect(extra.body.error.code).toBe('invalid_request');
      expect(extra.body.error.message).toMatch(/force/);
      expect((await post(`/v1/fleets/${fleet.slug}/promote`, {})).status).toBe(400);
      const notJson = await call(`${h.url}/v1/fleets/${fleet.slug}/promote`, {
        method: 'POST',
        body: '{"targetDomainId":',
      });
      expect(notJson.status).toBe(400);
      const big = await post(`/v1/fleets/${fleet.slug}/promote`, {
        targetDomainId: 'west',
        reason: 'x'.repeat(17_000),
      });
      expect(big.status).toBe(413);
      expect(big.body.error.code).toBe('payload_too_large');
      expect((await post(`/v1/fleets/${uniqueSlug('nope')}/promote`, { targetDomainId: 'west' })).status).toBe(404);
      expect((await h.store.operations.list(fleet.id)).length).toBe(0);
    });
  });

  describe('POST /demote', () => {
    it('starts demotionWorkflow for a standby, once, and refuses the active with 422', async () => {
      const fleet = await seed();
      const active = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'east' });
      expect(active.status).toBe(422);
      expect(active.body.error.code).toBe('invalid_target');
      const res = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'west' });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ status: 'accepted', operation: { kind: 'demote' } });
      const op = res.body.operation;
      expect((await describeWorkflow(op.workflowId)).type).toBe('demotionWorkflow');
      expect(await startArgs(op.workflowId)).toEqual([
        { fleetId: fleet.id, operationId: op.id, domainId: domain(fleet, 'west').id },
      ]);
      const joined = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'west' });
      expect(joined.body).toMatchObject({ status: 'joined', operation: { id: op.id } });
      const runId = await loseRun(op.workflowId);
      const again = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'west' });
      expect(again.body).toMatchObject({ status: 'joined', operation: { id: op.id } });
      expect(await latestRun(op.workflowId)).toEqual({ runId, status: 'TERMINATED' });
    });
  });

  describe('operations', () => {
    it('lists, reads (progress null without a worker) and aborts a running promotion by signal', async () => {
      const fleet = await seed();
      const { body } = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      const id = body.operation.id;
      const list = await call(`${h.url}/v1/fleets/${fleet.slug}/operations?limit=5`);
      expect(list.status).toBe(200);
      expect(list.body.operations.map((o: { id: string }) => o.id)).toEqual([id]);
      const one = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${id}`);
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ id, progress: null });

      const abort = await post(`/v1/fleets/${fleet.slug}/operations/${id}/abort`, { reason: 'operator said so' });
      expect(abort.status).toBe(202);
      const history = await h.temporal.client.workflow.getHandle(body.operation.workflowId).fetchHistory();
      const signal = history.events?.find((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'abort');
      expect(signal).toBeDefined();
    });

    it('aborts a running demotion by signal, as it does an uncommitted promotion', async () => {
      const fleet = await seed();
      const { body } = await post(`/v1/fleets/${fleet.slug}/demote`, { targetDomainId: 'west' });
      expect(body.operation).toMatchObject({ kind: 'demote' });
      const abort = await post(`/v1/fleets/${fleet.slug}/operations/${body.operation.id}/abort`, { reason: 'stop' });
      expect(abort.status).toBe(202);
      const history = await h.temporal.client.workflow.getHandle(body.operation.workflowId).fetchHistory();
      expect(history.events?.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'abort')).toBe(
        true,
      );
    });

    it('cancels an operation whose workflow never started, and refuses to abort a finished one with 409', async () => {
      const fleet = await seed();
      // As if the API had died between the insert and the workflow start.
      const { operation } = await h.store.operations.create({
        fleetId: fleet.id,
        kind: 'promote',
        targetDomainId: domain(fleet, 'west').id,
        reason: 'orphan',
        requestedBy: 'test',
      });
      await expect(describeWorkflow(operation.workflowId)).rejects.toBeInstanceOf(WorkflowNotFoundError);
      const res = await post(`/v1/fleets/${fleet.slug}/operations/${operation.id}/abort`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: operation.id, state: 'cancelled', error: { code: 'Aborted' } });
      const again = await post(`/v1/fleets/${fleet.slug}/operations/${operation.id}/abort`);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('operation_conflict');
    });

    it('`haru fleet status` shows the last failed operation with its step and error until a later one succeeds', async () => {
      const fleet = await seed();
      const status = async () => {
        const run = await runCli(['fleet', 'status', fleet.slug], { HARU_URL: h.url });
        expect(run.code).toBe(0);
        return run.stdout;
      };
      const create = async () =>
        (
          await h.store.operations.create({
            fleetId: fleet.id,
            kind: 'promote',
            targetDomainId: domain(fleet, 'west').id,
            reason: 'test',
            requestedBy: 'test',
          })
        ).operation;
      const failed = await create();
      await h.store.operations.fail(failed.id, {
        step: 'wakeModels',
        code: 'WakeTimeout',
        message: 'model still asleep',
      });
      expect(await status()).toContain(`last failed: promote ${failed.id} at `);
      expect(await status()).toContain(': wakeModels: WakeTimeout: model still asleep');
      // A later cancelled operation leaves it visible; a later success clears it.
      await h.store.operations.cancel((await create()).id, { step: 'pending', code: 'Aborted', message: 'x' });
      expect(await status()).toContain(`last failed: promote ${failed.id}`);
      const later = await create();
      await h.store.operations.start(later.id);
      expect(await h.store.operations.succeed(later.id)).toMatchObject({ state: 'succeeded' });
      expect(await status()).not.toContain('last failed');
    });

    it('`haru fleet operations` lists the operations newest first with the move, state and error', async () => {
      const fleet = await seed();
      const create = async () =>
        (
          await h.store.operations.create({
            fleetId: fleet.id,
            kind: 'promote',
            targetDomainId: domain(fleet, 'west').id,
            reason: 'test',
            requestedBy: 'test',
          })
        ).operation;
      const older = await create();
      await h.store.operations.fail(older.id, { step: 'probeModels', code: 'ProbeFailed', message: 'empty answer' });
      const newer = await create();
      const table = await runCli(['fleet', 'operations', fleet.slug], { HARU_URL: h.url });
      expect(table.code).toBe(0);
      const rows = table.stdout.trim().split('\n').slice(1);
      expect(rows.map((r) => (r.includes(newer.id) ? 'newer' : r.includes(older.id) ? 'older' : r))).toEqual([
        'newer',
        'older',
      ]);
      expect(rows[1]).toMatch(/promote +east → west +failed .*probeModels: ProbeFailed: empty answer$/);
      const json = await runCli(['fleet', 'operations', fleet.slug, '-o', 'json', '--limit', '1'], { HARU_URL: h.url });
      expect((JSON.parse(json.stdout) as { id: string }[]).map((o) => o.id)).toEqual([newer.id]);
    });

    it('answers 404 operation_not_found for an unknown id, a malformed id, or another fleet operation', async () => {
      const fleet = await seed();
      const other = await seed();
      const { body } = await post(`/v1/fleets/${other.slug}/promote`, { targetDomainId: 'west' });
      for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', body.operation.id]) {
        const res = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${id}`);
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('operation_not_found');
      }
      expect((await call(`${h.url}/v1/fleets/${fleet.slug}/operations?limit=0`)).status).toBe(400);
    });
  });

  describe('POST /reconcile', () => {
    it('signals checkNow to the fleet monitor and answers with the health of every domain', async () => {
      const fleet = await seed();
      const res = await post(`/v1/fleets/${fleet.slug}/reconcile`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ fleetId: fleet.id, fresh: false, monitor: null });
      expect(res.body.domains.map((d: { slug: string; isActive: boolean }) => [d.slug, d.isActive])).toEqual([
        ['east', true],
        ['west', false],
      ]);
      const handle = h.temporal.client.workflow.getHandle(`haru/${fleet.id}/monitor`);
      const history = await handle.fetchHistory();
      expect(history.events?.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'checkNow')).toBe(
        true,
      );
      expect((await handle.describe()).type).toBe('fleetMonitorWorkflow');
      await handle.terminate('test done');
      expect((await post(`/v1/fleets/${fleet.slug}/reconcile`, { now: true })).status).toBe(400);
    });
  });

  describe('POST /repair', () => {
    it('ends an operation whose run was lost, starts the monitor, and `haru fleet repair` prints the steps', async () => {
      const fleet = await seed();
      const first = await post(`/v1/fleets/${fleet.slug}/promote`, { targetDomainId: 'west' });
      await loseRun(first.body.operation.workflowId);
      const res = await post(`/v1/fleets/${fleet.slug}/repair`);
      expect(res.status).toBe(200);
      const steps = res.body.steps.map((s: { kind: string; outcome: string }) => [s.kind, s.outcome]);
      // First the orphan, last the monitor (a seeded standby's idle trainer is left to the monitor between).
      expect(steps[0]).toEqual(['end_orphaned_operation', 'done']);
      expect(steps.at(-1)).toEqual(['ensure_monitor', 'done']);
      expect(await h.store.operations.get(first.body.operation.id)).toMatchObject({
        state: 'failed',
        error: { code: 'workflow_ended' },
      });
      const monitor = h.temporal.client.workflow.getHandle(`haru/${fleet.id}/monitor`);
      expect((await monitor.describe()).type).toBe('fleetMonitorWorkflow');
      // Nothing left to end: a second repair does not end anything again.
      const cli = await runCli(['fleet', 'repair', fleet.slug], { HARU_URL: h.url });
      expect(cli.stdout).toMatch(/^ensure monitor: done \(/m);
      expect(cli.stdout).not.toMatch(/end orphaned operation/);
      await monitor.terminate('test done');
      expect((await post(`/v1/fleets/${fleet.slug}/repair`, { all: true })).status).toBe(400);
    });
  });

  describe('events', () => {
    it('pages the audit log with a cursor', async () => {
      const fleet = await seed();
      const seeded = await call(`${h.url}/v1/fleets/${fleet.slug}/events`);
      expect(seeded.body.events.length).toBeGreaterThan(0); // the layout apply is audited too
      const start = seeded.body.nextCursor;
      for (const n of [1, 2, 3]) await h.store.events.append({ fleetId: fleet.id, type: 'test', message: `e${n}` });
      const page = await call(`${h.url}/v1/fleets/${fleet.slug}/events?limit=2&after=${start}`);
      expect(page.status).toBe(200);
      expect(page.body.events.map((e: { message: string }) => e.message)).toEqual(['e1', 'e2']);
      const next = await call(`${h.url}/v1/fleets/${fleet.slug}/events?after=${page.body.nextCursor}`);
      expect(next.body.events.map((e: { message: string }) => e.message)).toEqual(['e3']);
      const empty = await call(`${h.url}/v1/fleets/${fleet.slug}/events?after=${next.body.nextCursor}`);
      expect(empty.body).toEqual({ events: [], nextCursor: next.body.nextCursor });
      expect((await call(`${h.url}/v1/fleets/${fleet.slug}/events?bogus=1`)).status).toBe(400);
    });

    it('answers the newest events first with order=desc, and `haru fleet events` prints them so', async () => {
      const fleet = await seed();
      for (const n of [1, 2, 3]) await h.store.events.append({ fleetId: fleet.id, type: 'test', message: `e${n}` });
      const newest = await call(`${h.url}/v1/fleets/${fleet.slug}/events?order=desc&limit=2`);
      expect(newest.body.events.map((e: { message: string }) => e.message)).toEqual(['e3', 'e2']);
      expect(newest.body.nextCursor).toBe(newest.body.events[0].id);
      const cli = await runCli(['fleet', 'events', fleet.slug, '--limit', '3', '-o', 'json'], { HARU_URL: h.url });
      expect((JSON.parse(cli.stdout) as { message: string }[]).map((e) => e.message)).toEqual(['e3', 'e2', 'e1']);
    });

    it('streams events appended after the cursor as SSE with follow=1', async () => {
      const fleet = await seed();
      const first = await h.store.events.append({ fleetId: fleet.id, type: 'test', message: 'before' });
      const ctrl = new AbortController();
      const res = await fetch(`${h.url}/v1/fleets/${fleet.slug}/events?follow=1&after=${first.id}`, {
        signal: ctrl.signal,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      await h.store.events.append({ fleetId: fleet.id, type: 'test', message: 'live-1' });
      await h.store.events.append({ fleetId: fleet.id, type: 'test', message: 'live-2' });
      while (!text.includes('live-2')) text += decoder.decode((await reader.read()).value, { stream: true });
      ctrl.abort();
      const frames = text
        .split('\n\n')
        .filter((f) => f.includes('data: '))
        .map((f) =>
          JSON.parse(
            f
              .split('\n')
              .find((l) => l.startsWith('data: '))!
              .slice(6),
          ),
        );
      expect(frames.map((e: { message: string }) => e.message)).toEqual(['live-1', 'live-2']);
      expect(text).toMatch(new RegExp(`id: ${frames[1].id}\\n`));
    });
  });

  describe('health', () => {
    it('answers /healthz without touching anything and /readyz when Postgres and Temporal answer', async () => {
      expect(await call(`${h.url}/healthz`)).toMatchObject({ status: 200, body: { status: 'ok' } });
      expect(await call(`${h.url}/readyz`)).toMatchObject({
        status: 200,
        body: { status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } },
      });
    });
  });
});
