import { McpApplyRequest } from '../../contracts/mcp';
import { ConsentRequests, type ConsentAnswer } from '../runs/consent-requests';

/** How long a client's apply request waits for the user before it is refused. */
export const APPLY_REQUEST_TTL_MS = 10 * 60_000;

export type ApplyAnswer = ConsentAnswer;

/**
 * Apply requests of MCP clients waiting for the user's yes (docs/architecture.md §17), under
 * `<home>/mcp/approvals`, shared by `airlock mcp` and the app (see `ConsentRequests`).
 */
export class ApplyApprovals extends ConsentRequests<McpApplyRequest> {
  constructor(home: string) {
    super(home, 'approvals', McpApplyRequest, 'mcp.apply');
  }

  override request(req: Omit<McpApplyRequest, 'requestId' | 'requestedAt' | 'expiresAt'>, ttlMs = APPLY_REQUEST_TTL_MS): Promise<McpApplyRequest> {
    return super.request(req, ttlMs);
  }
}
