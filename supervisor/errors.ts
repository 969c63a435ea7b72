import type { SlotKind } from '../schemas/enums';

/** A request named a GPU on which this host has no slot of that kind (HTTP 404 `not_found`). */
export class NoSlotError extends Error {
  constructor(
    readonly kind: SlotKind,
    readonly gpuIndex: number,
  ) {
    super(`GPU ${gpuIndex} has no ${kind} slot on this host`);
    this.name = 'NoSlotError';
  }
}
