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

export function isCalendarDate(value: string): boolean {
  const year = Number(value.slice(0, 4));
  const month = Number(value.slice(5, 7));
  const day = Number(value.slice(8, 10));
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
  return day <= days;
}

const DATE = '[0-9]{4}-[0-9]{2}-[0-9]{2}';
const TIME = '[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})';

/** Hours, minutes and seconds in range, the offset's too, on a real date; the pattern checked the shape. */
function isDateTime(value: string): boolean {
  const time = value.slice(11);
  const offset = time.endsWith('Z') ? '' : time.slice(-5);
  const inRange = (text: string, max: number) => Number(text) <= max;
  return (
    isCalendarDate(value.slice(0, 10)) &&
    inRange(time.slice(0, 2), 23) && inRange(time.slice(3, 5), 59) && inRange(time.slice(6, 8), 59) &&
    (offset === '' || (inRange(offset.slice(0, 2), 23) && inRange(offset.slice(3, 5), 59)))
  );
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
  // A timestamp as ISO 8601 writes it with an offset: whole seconds, a fraction of up to 9 digits, `Z` or ±hh:mm.
  // A `+` in a query is a space once decoded (form encoding): clients send the offset's sign as %2B.
  date_time: {
    pattern: `${DATE}T${TIME}`,
    validate: isDateTime,
    description: 'a date-time with seconds and an offset: YYYY-MM-DDThh:mm:ss, a fraction of up to 9 digits or none, then Z or ±hh:mm',
  },
  date_or_date_time: {
    pattern: `${DATE}(?:T${TIME})?`,
    validate: (value) => (value.length === 10 ? isCalendarDate(value) : isDateTime(value)),
    description: 'a calendar date (YYYY-MM-DD) or a date-time as `date_time` takes it',
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
  boolean: {
    pattern: '(?:true|false)',
    description: '`true` or `false`',
  },
  // The merchant id an acquirer assigned: not an internal UUID (the routes document).
  merchant_id: {
    pattern: '[A-Za-z0-9][A-Za-z0-9_-]{0,63}',
    description: 'a letter or digit, then up to 63 of A-Z a-z 0-9 _ -',
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
  slug: ['uuid', 'date', 'integer', 'positive_integer', 'boolean', 'merchant_id'],
  merchant_id: ['uuid', 'date', 'integer', 'positive_integer', 'boolean'],
  date_or_date_time: ['date', 'date_time'],
  integer: ['positive_integer'],
  uuid: [],
  date: [],
  date_time: [],
  positive_integer: [],
  boolean: [],
};

/** Whether every value `narrower` takes, `wider` takes too. */
export function takesAllOf(wider: ParamTypeName, narrower: ParamTypeName): boolean {
  return wider === narrower || TAKES_ALL_OF[wider].includes(narrower);
}
