import { DFA, isDisjointWith, JS, NFA } from 'refa';
import { PARAM_TYPE_NAMES, PARAM_TYPES, takesAllOf } from '../../../src/policy/param-types.js';

/** The values a type's pattern takes, as an automaton (refa), over all of UTF-16. */
function automaton(type: keyof typeof PARAM_TYPES): NFA {
  const { expression, maxCharacter } = JS.Parser.fromLiteral(new RegExp(PARAM_TYPES[type].pattern)).parse();
  return NFA.fromRegex(expression, { maxCharacter });
}

describe('takesAllOf, which policy diff uses to call a type change narrower or wider', () => {
  // Held to the patterns themselves: B's values are all A's when B and what A refuses have none in common.
  it.each(PARAM_TYPE_NAMES.flatMap((wider) => PARAM_TYPE_NAMES.map((narrower) => [wider, narrower] as const)))('%s takes every value of %s: as the patterns say', (wider, narrower) => {
    const refused = DFA.fromFA(automaton(wider));
    refused.complement();
    expect(takesAllOf(wider, narrower)).toBe(isDisjointWith(automaton(narrower), refused));
  });
});
