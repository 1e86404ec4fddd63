import pkg from '../../package.json' with { type: 'json' };

/** Airlock's version, from package.json (bundled in at build time, read as is under tsx). */
export const APP_VERSION: string = pkg.version;
