import { z } from 'zod';

/**
 * Choosing a project folder. In Electron, `projects:pickFolder` opens the system's folder dialog
 * (main process). A browser page has no such dialog: `projects:listFolders` lets the New run form
 * browse folders under the user's home on the host — folder names only, never files or their
 * contents, and never outside the home folder (docs/architecture.md §5).
 */

export const FolderListing = z.object({
  /** The folder listed, as an absolute real path. */
  path: z.string(),
  /** Its parent, or null at the home folder (the top of what can be browsed). */
  parent: z.string().nullable(),
  /** The user's home folder. */
  home: z.string(),
  /** Names of the folders inside (no files, no hidden folders), sorted. */
  folders: z.array(z.string()),
  /** True when there were more folders than listed. */
  truncated: z.boolean(),
});
export type FolderListing = z.infer<typeof FolderListing>;

export const projectsContracts = {
  /** Opens the system folder dialog where there is one (Electron); `native: false` elsewhere. */
  'projects:pickFolder': {
    input: z.strictObject({ defaultPath: z.string().max(4096).optional() }).default({}),
    output: z.object({ native: z.boolean(), path: z.string().nullable() }),
  },
  /** Folder names in a folder under the user's home (the home folder itself without `path`). */
  'projects:listFolders': {
    input: z.strictObject({ path: z.string().max(4096).optional() }).default({}),
    output: FolderListing,
  },
} as const;
