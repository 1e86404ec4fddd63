import type { ErrorInfo, ExcludedPreview } from '../../../contracts';
import { api } from '../api';
import { useFolderLookup } from './use-folder-lookup';

/**
 * Which files of the project folder stay out of the sandbox (`runs:previewExcluded`), read as the
 * user types; a folder that does not exist comes back as an error on the `projectDir` field.
 */
export function useExcludedPreview(projectDir: string): { preview: ExcludedPreview | undefined; error: ErrorInfo | undefined } {
  const { value, error } = useFolderLookup(projectDir, (dir) => api().call('runs:previewExcluded', { projectDir: dir }));
  return { preview: value, error };
}
