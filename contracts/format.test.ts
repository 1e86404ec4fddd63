import { describe, expect, it } from 'vitest';
import { formatBytes } from './format';

describe('formatBytes', () => {
  it('picks the unit at each power of 1024', () => {
    expect([0, 1023, 1024, 1536, 1024 ** 2 - 1, 1024 ** 2, 3 * 1024 ** 3].map(formatBytes)).toEqual(['0 B', '1023 B', '1.0 KiB', '1.5 KiB', '1024.0 KiB', '1.0 MiB', '3.00 GiB']);
  });
});
