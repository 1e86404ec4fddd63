import { z } from 'zod';

/**
 * `changes.json` of a run collected by an Airlock from before results were derived on the host
 * (it has `baseline.json` next to it). Shown for reading and exported whole, never applied, so only
 * what the list shows is required; loose, as that Airlock wrote more fields in the shape of its day.
 */
export const LegacyChanges = z.array(
  z.looseObject({
    path: z.string().min(1),
    oldPath: z.string().optional(),
    status: z.enum(['added', 'modified', 'deleted', 'renamed']),
  }),
);
