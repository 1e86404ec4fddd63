/** IPC channel names between preload and main (one for calls, three for push events). */
export const IPC_INVOKE = 'airlock:invoke';
export const IPC_SUBSCRIBE = 'airlock:subscribe';
export const IPC_UNSUBSCRIBE = 'airlock:unsubscribe';
export const IPC_EVENT = 'airlock:event';
