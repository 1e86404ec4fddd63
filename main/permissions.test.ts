import { describe, expect, it } from 'vitest';
import { grantsPermission } from './permissions';

describe('grantsPermission', () => {
  it('grants notifications and clipboard writes only', () => {
    expect(grantsPermission('notifications')).toBe(true);
    expect(grantsPermission('clipboard-sanitized-write')).toBe(true);
    for (const p of ['clipboard-read', 'media', 'geolocation', 'openExternal', 'fullscreen', 'pointerLock', 'hid', 'serial', 'usb', '']) {
      expect(grantsPermission(p)).toBe(false);
    }
  });
});
