/**
 * @module
 * Settings that existed and were removed. Set, they are ignored, and `serve` says so at start-up:
 * an operator who tuned one must learn that it no longer does anything.
 */

/** Each retired variable, and what took its place. */
export const RETIRED_SETTINGS: Readonly<Record<string, string>> = {
  KEY_NEGATIVE_CACHE_TTL_MS: "removed on 2026-11-28; every verdict, an unknown key's included, now lives KEY_CACHE_TTL_MS",
};

/** The retired variables set in `env`, in the table's order. */
export function retiredSettingsIn(env: NodeJS.ProcessEnv): { readonly setting: string; readonly instead: string }[] {
  return Object.entries(RETIRED_SETTINGS)
    .filter(([setting]) => env[setting] !== undefined)
    .map(([setting, instead]) => ({ setting, instead }));
}
