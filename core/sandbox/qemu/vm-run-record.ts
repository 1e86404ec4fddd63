import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { parseStoredJson } from '../../common/stored-json';

/**
 * The VM's own record of a run (`<runsDir>/<runId>/vm.json`): what booted, and which process owns
 * it, which crash recovery reads to decide what is an orphan (docs/architecture.md §13).
 */
export const VmRunRecord = z.object({
  runId: z.string().min(1),
  image: z.string(),
  createdAt: z.string(),
  accel: z.enum(['kvm', 'hvf', 'tcg']),
  accelRetry: z.string().optional(),
  /** `<hostname>:<pid>` of the process that started the VM. */
  owner: z.string().min(1),
});
export type VmRunRecord = z.infer<typeof VmRunRecord>;

/**
 * Reads a run's VM record. Missing: undefined. Damaged: `{ problem }` naming the file and field —
 * never a record with a made-up owner, since an unknown owner reads as "gone" and gets reaped.
 */
export async function readVmRunRecord(file: string): Promise<{ record?: VmRunRecord; problem?: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { problem: `${file} could not be read (${(err as Error).message})` };
  }
  try {
    return { record: parseStoredJson(VmRunRecord, file, text, 'the VM is left alone while its QEMU process runs; once that has stopped, the next start of Airlock removes it.') };
  } catch (err) {
    return { problem: (err as Error).message };
  }
}
