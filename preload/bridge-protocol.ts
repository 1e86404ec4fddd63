/** IPC channel names between preload and main (one for calls, three for push events, one for terminal flow control). */
export const IPC_INVOKE = 'airlock:invoke';
export const IPC_SUBSCRIBE = 'airlock:subscribe';
export const IPC_UNSUBSCRIBE = 'airlock:unsubscribe';
export const IPC_EVENT = 'airlock:event';
/** The renderer acknowledges terminal output it drew or skipped: a running total of characters since it subscribed. */
export const IPC_TERMINAL_ACK = 'airlock:terminal-ack';
