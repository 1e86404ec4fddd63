/** Types for scripts/build.mjs (the build of everything that runs; see there). */
export declare const root: string;
export type BuildTarget = 'bundles' | 'app';
export declare function isStale(target: BuildTarget): boolean;
export declare function buildBundles(): Promise<void>;
export declare function buildApp(): Promise<void>;
export declare function ensureBuilt(targets?: BuildTarget[], opts?: { force?: boolean; log?: (message: string) => void }): Promise<void>;
