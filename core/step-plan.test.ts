import { ID } from './fleet-fixtures';
import { compensationFor, planDemotion, planPromotion } from './step-plan';

const base = { targetDomainId: ID.b, fromDomainId: ID.a, trainingSlotCount: 1, isRoutingCommitted: false };
const skipped = (plan: { step: string; skipReason: string | null }[]) =>
  plan.filter((s) => s.skipReason !== null).map((s) => s.step);

describe('planPromotion', () => {
  it('runs all six steps in order for a standby with training and an old active', () => {
    const plan = planPromotion(base);
    expect(plan.map((s) => s.step)).toEqual([
      'stopTraining',
      'verifyGpuReleased',
      'wakeModels',
      'probeModels',
      'commitRouting',
      'demoteOldActive',
    ]);
    expect(skipped(plan)).toEqual([]);
  });

  it('skips the training steps for a target without training slots', () => {
    expect(skipped(planPromotion({ ...base, trainingSlotCount: 0 }))).toEqual(['stopTraining', 'verifyGpuReleased']);
  });

  it('skips the demotion when the fleet had no active', () => {
    expect(skipped(planPromotion({ ...base, fromDomainId: null }))).toEqual(['demoteOldActive']);
  });

  it('skips the demotion when the old active is the target itself', () => {
    expect(skipped(planPromotion({ ...base, fromDomainId: ID.b }))).toEqual(['demoteOldActive']);
  });

  it('skips every pre-commit step when routing was already committed, keeping the commit and demotion', () => {
    const plan = planPromotion({ ...base, isRoutingCommitted: true });
    expect(skipped(plan)).toEqual(['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels']);
    expect(plan[0]?.skipReason).toBe('routing already committed by this operation');
  });
});

describe('planDemotion', () => {
  it('drains, sleeps and starts training', () => {
    expect(planDemotion({ trainingSlotCount: 2 })).toEqual([
      { step: 'drain', skipReason: null },
      { step: 'sleepModels', skipReason: null },
      { step: 'startTraining', skipReason: null },
    ]);
  });
  it('skips training for a domain without training slots', () => {
    expect(skipped(planDemotion({ trainingSlotCount: 0 }))).toEqual(['startTraining']);
  });
});

describe('compensationFor', () => {
  it('does nothing when no step started', () => {
    expect(compensationFor([])).toEqual([]);
  });
  it('restarts training after a failure while stopping it or verifying the GPU', () => {
    expect(compensationFor(['stopTraining'])).toEqual(['startTraining']);
    expect(compensationFor(['stopTraining', 'verifyGpuReleased'])).toEqual(['startTraining']);
  });
  it('puts models back to sleep before restarting training once waking began', () => {
    expect(compensationFor(['stopTraining', 'verifyGpuReleased', 'wakeModels'])).toEqual([
      'sleepModels',
      'startTraining',
    ]);
    expect(compensationFor(['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels'])).toEqual([
      'sleepModels',
      'startTraining',
    ]);
  });
  it('only sleeps models for a target without training', () => {
    expect(compensationFor(['wakeModels'])).toEqual(['sleepModels']);
  });
});
