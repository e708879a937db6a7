/**
 * The types a path parameter can have. Each is a strict, canonical form: a value that is not written
 * exactly so does not match, so the string the policy judged is the string the upstream receives.
 */
export interface ParamType {
  /** Regular expression source for one value; no anchors, no capture groups. */
  readonly pattern: string;
  /** Extra check a regular expression cannot express cheaply (e.g. calendar validity). */
  readonly validate?: (value: string) => boolean;
  readonly description: string;
}

function isCalendarDate(value: string): boolean {
  const year = Number(value.slice(0, 4));
  const month = Number(value.slice(5, 7));
  const day = Number(value.slice(8, 10));
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
  return day <= days;
}

export const PARAM_TYPES = {
  uuid: {
    pattern: '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
    description: 'a UUID in lower-case hexadecimal text form (8-4-4-4-12)',
  },
  date: {
    pattern: '[0-9]{4}-[0-9]{2}-[0-9]{2}',
    validate: isCalendarDate,
    description: 'a calendar date, YYYY-MM-DD',
  },
  integer: {
    pattern: '(?:0|[1-9][0-9]{0,17})',
    description: 'a non-negative decimal integer without leading zeros, at most 18 digits',
  },
  // A page number: the API document's pages start at 1 (`current_page`).
  positive_integer: {
    pattern: '[1-9][0-9]{0,17}',
    description: 'a decimal integer of 1 or more, without leading zeros',
  },
  slug: {
    pattern: '[A-Za-z0-9_-]{1,128}',
    description: '1 to 128 of A-Z a-z 0-9 _ -',
  },
} as const satisfies Record<string, ParamType>;

export type ParamTypeName = keyof typeof PARAM_TYPES;
export const PARAM_TYPE_NAMES = Object.keys(PARAM_TYPES) as [ParamTypeName, ...ParamTypeName[]];

/**
 * For each type, the other types all of whose values it takes too: a change from one of these to it
 * widens what a route takes, and the reverse narrows it. A unit test holds this table to the patterns.
 */
const TAKES_ALL_OF: Readonly<Record<ParamTypeName, readonly ParamTypeName[]>> = {
  slug: ['uuid', 'date', 'integer', 'positive_integer'],
  integer: ['positive_integer'],
  uuid: [],
  date: [],
  positive_integer: [],
};

/** Whether every value `narrower` takes, `wider` takes too. */
export function takesAllOf(wider: ParamTypeName, narrower: ParamTypeName): boolean {
  return wider === narrower || TAKES_ALL_OF[wider].includes(narrower);
}
