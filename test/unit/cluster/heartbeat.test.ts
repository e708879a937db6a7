import { UnansweredQuestions } from '../../../src/cluster/heartbeat.js';

const round = (...answers: [string, boolean][]) => answers.map(([worker, answered]) => ({ worker, answered }));

describe('UnansweredQuestions', () => {
  it('names a worker once it has missed the allowed number of questions in a row, and only once', () => {
    const watch = new UnansweredQuestions<string>(3);
    expect(watch.record(round(['a', false], ['b', true]))).toEqual([]);
    expect(watch.record(round(['a', false], ['b', true]))).toEqual([]);
    expect(watch.record(round(['a', false], ['b', true]))).toEqual(['a']);
    expect(watch.record(round(['b', true]))).toEqual([]);
  });

  it('starts counting again at an answer: a primary that was frozen finds one late answer per worker, and kills nobody', () => {
    const watch = new UnansweredQuestions<string>(2);
    // The question out when the primary froze times out before the answer waiting for it is read.
    expect(watch.record(round(['a', false], ['b', false]))).toEqual([]);
    expect(watch.record(round(['a', true], ['b', true]))).toEqual([]);
    expect(watch.record(round(['a', false], ['b', true]))).toEqual([]);
    expect(watch.record(round(['a', true], ['b', true]))).toEqual([]);
  });

  it('allows at least two misses, whatever it is told', () => {
    const watch = new UnansweredQuestions<string>(0);
    expect(watch.allowed).toBe(2);
    expect(watch.record(round(['a', false]))).toEqual([]);
    expect(watch.record(round(['a', false]))).toEqual(['a']);
  });

  it('forgets a worker that is gone', () => {
    const watch = new UnansweredQuestions<string>(2);
    watch.record(round(['a', false]));
    watch.forget('a');
    expect(watch.record(round(['a', false]))).toEqual([]);
  });
});
