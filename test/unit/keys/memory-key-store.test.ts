import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { keyStoreContract } from '../../helpers/key-store-contract.js';

keyStoreContract('MemoryKeyStore', async () => {
  const store = new MemoryKeyStore();
  return { store, observer: store, close: () => store.close() };
});
