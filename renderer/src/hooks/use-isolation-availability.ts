import { useEffect } from 'react';
import { useDoctorStore } from '../stores/doctor-store';

/** Whether the setup check says gVisor cannot run here (its `gvisor` check warns; false until known). */
export function useGvisorBlocked(): boolean {
  return useDoctorStore((s) => s.report?.checks.find((c) => c.id === 'gvisor')?.status === 'warn');
}

/** Whether the setup check says "Virtual machine" isolation works here (undefined until known). */
export function useVmAvailability(): { available: boolean; reason: string } | undefined {
  const report = useDoctorStore((s) => s.report);
  const checking = useDoctorStore((s) => s.checking);
  useEffect(() => {
    if (!report && !checking) void useDoctorStore.getState().check();
  }, []); // once per mount: the report is shared through the doctor store
  return report?.checks.find((c) => c.id === 'isolation')?.vm;
}
