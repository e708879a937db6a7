/**
 * @module
 * Percent-encoding undone layer by layer, for the places that search a text for what it could hide
 * encoded (a key in a log line, the upstream's host in a response header).
 */

const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const ANY_ESCAPE = /%[0-9A-Fa-f]{2}/;

/** The text with `layers` rounds of `%XX` decoded at most, and whether no escape was left after them. */
export interface PercentDecoded {
  readonly text: string;
  /** false: the text was encoded more often than `layers`, and its innermost layer was not reached. */
  readonly complete: boolean;
}

/**
 * Every `%XX` decoded, as often as the text was encoded (`%255F` is `%5F` is `_`), up to `layers`
 * rounds (each is a pass over the text); an invalid escape stays as it is.
 */
export function percentDecode(text: string, layers = 4): PercentDecoded {
  let current = text;
  for (let layer = 0; layer < layers; layer++) {
    const next = current.replace(ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === current) return { text: current, complete: true };
    current = next;
  }
  return { text: current, complete: !ANY_ESCAPE.test(current) };
}
