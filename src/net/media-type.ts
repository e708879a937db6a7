/**
 * @module
 * A request's Content-Type, read strictly (RFC 9110 §8.3.1): the gateway checks a body as the media
 * type says, and the upstream must not be able to read the header another way.
 */

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\t\\x20-\\x7e])*"';
const MEDIA_TYPE = new RegExp(`^(${TOKEN}/${TOKEN})((?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|${QUOTED}))*)[ \\t]*$`);
const PARAMETER = new RegExp(`;[ \\t]*(${TOKEN})=(${TOKEN}|${QUOTED})`, 'g');

/**
 * The media type of a Content-Type, lower case, when it is well formed and its only parameter is a
 * `charset` of UTF-8, given once (quoted or not, in any case); otherwise null. Any other parameter,
 * or a charset given twice, is a reading the gateway and the upstream could disagree on.
 */
export function utf8MediaType(header: string): string | null {
  const match = MEDIA_TYPE.exec(header);
  if (match === null) return null;
  let charsets = 0;
  for (const [, name, raw] of match[2]!.matchAll(PARAMETER)) {
    const value = raw!.startsWith('"') ? raw!.slice(1, -1).replace(/\\(.)/g, '$1') : raw!;
    if (name!.toLowerCase() !== 'charset' || value.toLowerCase() !== 'utf-8' || ++charsets > 1) return null;
  }
  return match[1]!.toLowerCase();
}
