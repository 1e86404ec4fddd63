/** Types for scripts/electron-binary.mjs. */
export declare function electronBinary(): { path?: string; reason: string };
