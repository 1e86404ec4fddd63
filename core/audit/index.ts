export { AuditLog, verifyAuditLog, hashAuditRecord, type AuditVerifyResult, type AuditExpectation, type AuditLogOptions, type ChainStart } from './audit-log';
export { openApplyLog } from './apply-log';
export { GENESIS_HASH, type AuditRecord, type AuditRecordData, type AuditRecordType } from './audit-records';
export { canonicalJson } from './canonical-json';
