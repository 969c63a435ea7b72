import { and, eq, inArray } from 'drizzle-orm';
import { isPlainHttpOffLoopback } from '../lib/loopback';
import { IN_FLIGHT_OPERATION_STATES } from '../schemas/enums';
import type { FleetLayout } from '../schemas/layout';
import { fleetPolicySchema } from '../schemas/policy';
import type { HaruDatabase, HaruDb } from './client';
import {
  domainFields,
  domainFieldsOfRow,
  initialSlotState,
  sameJson,
  slotFields,
  slotFieldsOfRow,
  slotKey,
} from './layout/rows';
import { parseLayout } from './layout/validate';
import { type DomainRow, domains, events, fleets, operations, slots } from './schema';
import { type Store, storeInternals } from './store';

export { LayoutValidationError, parseLayout, validateLayout } from './layout/validate';

/** What one apply did, by reference (`fleet dev`, `domain dev/east`, `slot dev/east/gpu0/inference`). */
export interface LayoutApplyReport {
  fleetId: string;
  fleetSlug: string;
  created: string[];
  updated: string[];
  unchanged: string[];
  pruned: string[];
  /** In the database but not in the layout, kept because `prune` was off. */
  left: string[];
  notes: string[];
}

/** Prune was asked to remove something in use; nothing was written. */
export class LayoutApplyRefusedError extends Error {
  constructor(readonly reasons: string[]) {
    super(`layout not applied:\n${reasons.map((r) => `  ${r}`).join('\n')}`);
    this.name = 'LayoutApplyRefusedError';
  }
}

type Tx = Parameters<Parameters<HaruDb['transaction']>[0]>[0];

interface ApplyContext {
  tx: Tx;
  layout: FleetLayout;
  prune: boolean;
  at: Date;
  report: LayoutApplyReport;
  refusals: string[];
  /** Domains an in-flight operation targets or started from: prune never touches them. */
  busyDomainIds: Set<string>;
}

/**
 * Applies a fleet layout: validates the whole document first (LayoutValidationError, nothing written),
 * then, in one transaction, creates what is missing and updates what the layout decides (policy, display
 * names, URLs, placement, launch, slot contents). Idempotent: a second apply reports everything unchanged
 * and writes nothing. The routing pointer is set only when the fleet is created; re-applying never moves
 * it. With `prune`, domains and slots missing from the layout are deleted, except the active domain and
 * anything an in-flight operation uses: then LayoutApplyRefusedError and nothing is written.
 */
export async function applyLayout(
  target: Store | HaruDatabase,
  input: unknown,
  opts: { prune?: boolean; now?: () => Date } = {},
): Promise<LayoutApplyReport> {
  const layout = parseLayout(input);
  const internals = 'db' in target ? { database: target, now: undefined } : storeInternals(target);
  if (!internals) throw new Error('applyLayout needs a store made by createStore, or a HaruDatabase');
  const now = opts.now ?? internals.now ?? (() => new Date());
  return internals.database.db.transaction(async (tx) => {
    const ctx: ApplyContext = {
      tx,
      layout,
      prune: opts.prune ?? false,
      at: now(),
      report: emptyReport(layout.fleet.slug),
      refusals: [],
      busyDomainIds: new Set(),
    };
    const { fleetId, isNew, activeDomainId } = await upsertFleet(ctx);
    const existing = await tx.select().from(domains).where(eq(domains.fleetId, fleetId)).for('update'); // a concurrent operation insert (key share on its target) waits for this apply
    const inFlight = await tx
      .select({ target: operations.targetDomainId, from: operations.fromDomainId })
      .from(operations)
      .where(and(eq(operations.fleetId, fleetId), inArray(operations.state, [...IN_FLIGHT_OPERATION_STATES])));
    for (const op of inFlight) {
      ctx.busyDomainIds.add(op.target);
      if (op.from) ctx.busyDomainIds.add(op.from);
    }
    const idsBySlug = await applyDomains(ctx, fleetId, existing, activeDomainId);
    if (isNew) {
      await tx
        .update(fleets)
        .set({ activeDomainId: idsBySlug.get(layout.fleet.activeDomain)! })
        .where(eq(fleets.id, fleetId));
    } else {
      noteActiveMismatch(ctx, existing, activeDomainId);
    }
    if (ctx.refusals.length) throw new LayoutApplyRefusedError(ctx.refusals);
    const { created, updated, pruned } = ctx.report;
    if (created.length + updated.length + pruned.length > 0) {
      await tx.insert(events).values({
        fleetId,
        type: 'layout.applied',
        message: `layout applied: ${created.length} created, ${updated.length} updated, ${pruned.length} pruned`,
        data: { created, updated, pruned, left: ctx.report.left },
        createdAt: ctx.at,
      });
    }
    return ctx.report;
  });
}

/** What an apply says about a supervisor reached over plain HTTP off loopback: refused, or allowed loudly. */
const plainHttpNote = (ref: string, domain: FleetLayout['domains'][number]): string =>
  domain.supervisor?.insecure
    ? `WARNING: ${ref} reaches its supervisor over plain HTTP (${domain.supervisorUrl}, supervisor.insecure): ` +
      'its token and every command cross the network readable by anyone on the path'
    : `${ref}: the worker will refuse its plain-HTTP supervisor ${domain.supervisorUrl}; serve it over https:// ` +
      'or set supervisor.insecure';

const emptyReport = (fleetSlug: string): LayoutApplyReport => ({
  fleetId: '',
  fleetSlug,
  created: [],
  updated: [],
  unchanged: [],
  pruned: [],
  left: [],
  notes: [],
});

/** Inserts the fleet if missing, then locks its row so concurrent applies of one fleet run one at a time. */
async function upsertFleet(ctx: ApplyContext) {
  const { tx, layout, report, at } = ctx;
  const policy = fleetPolicySchema.parse(layout.fleet.policy);
  const displayName = layout.fleet.displayName ?? layout.fleet.slug;
  // Stored for the store's submit, which checks a job against them (§3.6): the API has no layout file.
  const trainingTemplates = layout.training?.templates ?? [];
  const inserted = await tx
    .insert(fleets)
    .values({ slug: layout.fleet.slug, displayName, policy, trainingTemplates, createdAt: at, updatedAt: at })
    .onConflictDoNothing({ target: fleets.slug })
    .returning({ id: fleets.id });
  const [row] = await tx.select().from(fleets).where(eq(fleets.slug, layout.fleet.slug)).for('update');
  if (!row) throw new Error(`fleet ${layout.fleet.slug} vanished during apply`);
  report.fleetId = row.id;
  const ref = `fleet ${layout.fleet.slug}`;
  if (inserted.length) {
    report.created.push(ref);
  } else if (
    row.displayName !== displayName ||
    !sameJson(row.policy, policy) ||
    !sameJson(row.trainingTemplates, trainingTemplates)
  ) {
    await tx.update(fleets).set({ displayName, policy, trainingTemplates, updatedAt: at }).where(eq(fleets.id, row.id));
    report.updated.push(ref);
  } else {
    report.unchanged.push(ref);
  }
  return { fleetId: row.id, isNew: inserted.length > 0, activeDomainId: row.activeDomainId };
}

async function applyDomains(ctx: ApplyContext, fleetId: string, existing: DomainRow[], activeDomainId: string | null) {
  const { tx, layout, report, at } = ctx;
  const idsBySlug = new Map<string, string>();
  for (const domain of layout.domains) {
    const ref = `domain ${layout.fleet.slug}/${domain.slug}`;
    const fields = domainFields(domain);
    const current = existing.find((d) => d.slug === domain.slug);
    let id: string;
    if (!current) {
      const [row] = await tx
        .insert(domains)
        .values({ fleetId, slug: domain.slug, ...fields, stateChangedAt: at, createdAt: at, updatedAt: at })
        .returning({ id: domains.id });
      id = row!.id;
      report.created.push(ref);
    } else {
      id = current.id;
      if (sameJson(domainFieldsOfRow(current), fields)) report.unchanged.push(ref);
      else {
        await tx
          .update(domains)
          .set({ ...fields, updatedAt: at })
          .where(eq(domains.id, id));
        report.updated.push(ref);
      }
    }
    idsBySlug.set(domain.slug, id);
    if (isPlainHttpOffLoopback(domain.supervisorUrl)) report.notes.push(plainHttpNote(ref, domain));
    await applySlots(ctx, id, ref.replace(/^domain /, ''), domain.slots);
  }
  for (const stale of existing.filter((d) => !idsBySlug.has(d.slug))) {
    const ref = `domain ${layout.fleet.slug}/${stale.slug}`;
    if (!ctx.prune) report.left.push(ref);
    else if (stale.id === activeDomainId) ctx.refusals.push(`cannot prune ${ref}: it is the fleet's active domain`);
    else if (ctx.busyDomainIds.has(stale.id)) ctx.refusals.push(`cannot prune ${ref}: an in-flight operation uses it`);
    else {
      await tx.delete(domains).where(eq(domains.id, stale.id));
      report.pruned.push(ref);
    }
  }
  if (ctx.prune && activeDomainId) {
    const active = existing.find((d) => d.id === activeDomainId);
    const inLayout = layout.domains.find((d) => d.slug === active?.slug);
    if (inLayout && !inLayout.slots.some((s) => s.kind === 'inference')) {
      ctx.refusals.push(`cannot prune the inference slots of active domain ${layout.fleet.slug}/${inLayout.slug}`);
    }
  }
  return idsBySlug;
}

async function applySlots(
  ctx: ApplyContext,
  domainId: string,
  domainRef: string,
  wanted: FleetLayout['domains'][number]['slots'],
) {
  const { tx, report, at } = ctx;
  const existing = await tx.select().from(slots).where(eq(slots.domainId, domainId));
  const keys = new Set<string>();
  for (const slot of wanted) {
    const key = slotKey(slot);
    keys.add(key);
    const ref = `slot ${domainRef}/${key}`;
    const fields = slotFields(slot);
    const current = existing.find((s) => slotKey(s) === key);
    if (!current) {
      await tx.insert(slots).values({
        domainId,
        kind: slot.kind,
        gpuIndex: slot.gpuIndex,
        state: initialSlotState(slot.kind),
        ...fields,
        stateChangedAt: at,
        createdAt: at,
        updatedAt: at,
      });
      report.created.push(ref);
    } else if (sameJson(slotFieldsOfRow(current), fields)) {
      report.unchanged.push(ref);
    } else {
      await tx
        .update(slots)
        .set({ ...fields, updatedAt: at })
        .where(eq(slots.id, current.id));
      report.updated.push(ref);
    }
  }
  const stale = existing.filter((s) => !keys.has(slotKey(s)));
  for (const slot of stale) {
    const ref = `slot ${domainRef}/${slotKey(slot)}`;
    if (!ctx.prune) report.left.push(ref);
    else if (ctx.busyDomainIds.has(domainId))
      ctx.refusals.push(`cannot prune ${ref}: an in-flight operation uses its domain`);
    else {
      await tx.delete(slots).where(eq(slots.id, slot.id));
      report.pruned.push(ref);
    }
  }
}

/** Re-applying never moves the pointer; say so when the file's activeDomain disagrees with it. */
function noteActiveMismatch(ctx: ApplyContext, existing: DomainRow[], activeDomainId: string | null) {
  const active = existing.find((d) => d.id === activeDomainId);
  if (active?.slug !== ctx.layout.fleet.activeDomain) {
    ctx.report.notes.push(
      `fleet ${ctx.layout.fleet.slug} is served by ${active ? `domain ${active.slug}` : 'no domain'}, not ` +
        `${ctx.layout.fleet.activeDomain} as the layout says: the routing pointer moves only by promotion`,
    );
  }
}
