/**
 * @module
 * Which merchant belongs to which acquirer. The sample has no merchant endpoints of its own: the
 * merchants are fixed at start, and every merchant-scoped route asks here first.
 */
import { refuse } from './sample-http.js';

/** Merchant ids (as the acquirer assigned them) per acquirer id. */
export type SampleMerchants = Readonly<Record<string, readonly string[]>>;

/** Two merchants for each acquirer, `<acquirer>_m1` and `<acquirer>_m2`. */
export function sampleMerchants(acquirerIds: Iterable<string>): Record<string, string[]> {
  return Object.fromEntries([...new Set(acquirerIds)].map((acquirerId) => [acquirerId, [`${acquirerId}_m1`, `${acquirerId}_m2`]]));
}

export interface MerchantDirectory {
  /** Every acquirer with its merchants, in the order given. */
  readonly merchants: SampleMerchants;
  /**
   * Returns when `merchantId` is one of `acquirerId`'s; throws a 403 refusal when it is another
   * acquirer's (as the EOD statements do) and a 404 when no acquirer has it.
   */
  assertOwn(acquirerId: string, merchantId: string): void;
}

export function createMerchantDirectory(merchants: SampleMerchants): MerchantDirectory {
  const owners = new Map<string, string>();
  for (const [acquirerId, ids] of Object.entries(merchants)) {
    for (const id of ids) {
      if (owners.has(id)) throw new Error(`sample merchant ${id} is given to both ${owners.get(id)} and ${acquirerId}`);
      owners.set(id, acquirerId);
    }
  }
  return {
    merchants,
    assertOwn(acquirerId, merchantId) {
      const owner = owners.get(merchantId);
      if (owner === undefined) throw refuse(404, 'merchant not found');
      if (owner !== acquirerId) throw refuse(403, 'forbidden');
    },
  };
}
