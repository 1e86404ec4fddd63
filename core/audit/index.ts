export { AuditLog, verifyAuditLog, hashAuditRecord, sha256Hex, type AuditVerifyResult, type AuditExpectation, type AuditLogOptions } from './audit-log';
export { GENESIS_HASH, type AuditRecord, type AuditRecordData, type AuditRecordType } from './audit-records';
export { canonicalJson } from './canonical-json';
