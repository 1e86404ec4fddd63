import { useEffect, useState } from 'react';
import { api } from '../api';

/** What wins over the engine and VM settings in this process (`--engine-host`, `AIRLOCK_*`). */
export function useAppOverrides(): string[] {
  const [overrides, setOverrides] = useState<string[]>([]);
  useEffect(() => {
    let live = true;
    api().call('settings:appInfo', {}).then((i) => { if (live) setOverrides(i.overrides ?? []); }, () => undefined);
    return () => { live = false; };
  }, []);
  return overrides;
}
