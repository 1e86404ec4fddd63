import { z } from 'zod';

/** Run ids are sortable by creation time: `r-<base36 ms>-<8 hex>`. */
export const RunId = z.string().regex(/^r-[0-9a-z]+-[0-9a-f]{8}$/, 'not a run id');
export type RunId = z.infer<typeof RunId>;

/** Provider ids: lowercase letters, digits and dashes (`anthropic`, `openai`, `ollama`, …). */
export const ProviderId = z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, 'provider ids are lowercase letters, digits and dashes');
export type ProviderId = z.infer<typeof ProviderId>;
