import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { resolveGuestUser } from './base-disk';

const passwd = ['root:x:0:0:root:/root:/bin/bash', 'airlock:x:1000:1000::/home/airlock:/bin/bash', 'other:x:1001:1002::/srv/other:/bin/sh'].join('\n');

describe('resolveGuestUser', () => {
  it('takes the image USER as uid:gid, name or uid, with the home from HOME or passwd', () => {
    expect(resolveGuestUser('1000:1000', passwd, ['HOME=/home/airlock'], '/workspace')).toEqual({ uid: 1000, gid: 1000, home: '/home/airlock', workdir: '/workspace' });
    expect(resolveGuestUser('other', passwd, [], '/w')).toEqual({ uid: 1001, gid: 1002, home: '/srv/other', workdir: '/w' });
    expect(resolveGuestUser('1001', passwd, [], '/w').gid).toBe(1002);
    // An image without USER runs the helper as 1000, like the Docker driver.
    expect(resolveGuestUser('', passwd, [], '/w').uid).toBe(1000);
  });

  it('refuses root and unknown users with a typed error', () => {
    expect(() => resolveGuestUser('root', passwd, [], '/w')).toThrow(AirlockError);
    expect(() => resolveGuestUser('0:0', passwd, [], '/w')).toThrow(/non-root/);
    expect(() => resolveGuestUser('nobody-here', passwd, [], '/w')).toThrow(/not in its \/etc\/passwd/);
  });
});
