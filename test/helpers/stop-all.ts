/**
 * For afterAll: runs every stop, in order, even when one fails or its resource was never made (a
 * beforeAll that failed half-way leaves the rest undefined), then throws the first failure. A stop
 * skipped there leaves a redis-server or a gateway running, and jest waiting on it for ever.
 */
export async function stopAll(...stops: (() => unknown)[]): Promise<void> {
  const failures: unknown[] = [];
  for (const stop of stops) {
    try {
      await stop();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length > 0) throw failures[0];
}
