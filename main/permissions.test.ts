import { describe, expect, it } from 'vitest';
import { grantsPermission, passesPermissionCheck } from './permissions';

describe('grantsPermission', () => {
  it('grants notifications and clipboard writes only', () => {
    expect(grantsPermission('notifications')).toBe(true);
    expect(grantsPermission('clipboard-sanitized-write')).toBe(true);
    for (const p of ['clipboard-read', 'media', 'geolocation', 'openExternal', 'fullscreen', 'pointerLock', 'hid', 'serial', 'usb', '']) {
      expect(grantsPermission(p)).toBe(false);
    }
  });
});

describe('passesPermissionCheck', () => {
  it('denies device and other checks, also for our own UI', () => {
    for (const p of ['hid', 'serial', 'usb', 'media', 'clipboard-read', 'geolocation', 'bluetooth', 'storage-access']) expect(passesPermissionCheck(p, 'app://airlock')).toBe(false);
  });
  it('passes the granted ones for the UI’s origin only', () => {
    expect(passesPermissionCheck('notifications', 'app://airlock')).toBe(true);
    expect(passesPermissionCheck('notifications', 'app://airlock/')).toBe(true);
    expect(passesPermissionCheck('notifications', 'https://example.invalid')).toBe(false);
    expect(passesPermissionCheck('notifications', 'file://')).toBe(false);
    expect(passesPermissionCheck('notifications', undefined)).toBe(false);
    expect(passesPermissionCheck('notifications', 'http://localhost:5173', 'http://localhost:5173/')).toBe(true);
    expect(passesPermissionCheck('notifications', 'http://localhost:5173')).toBe(false);
  });
});
