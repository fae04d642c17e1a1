// Types of `jobhost/testing`, for reports' tests written in TypeScript.
import type { Batch, Report } from './index.js';

export type Columns = [string, string][];
export type Row = Record<string, number | bigint | string | Uint8Array | null>;

export function batch(columns: Columns, rows: Row[]): Batch;
export function witBatch(columns: Columns, rows: Row[]): unknown;

export interface RunOptions {
  columns?: Columns;
  rows?: Row[];
  batches?: unknown[];
  batchRows?: number;
  window?: { job?: string; key?: string; label?: string; start?: string; end?: string; timezone?: string };
  now?: string;
  cursor?: string;
  attempt?: number;
  params?: Record<string, string>;
  destinations?: string[];
}

export interface Ran {
  output: { summary: string; cursor?: string } | null;
  error: unknown;
  described: string | null;
  messages: { destination: string; body: Uint8Array; contentType: string }[];
  logs: { level: string; message: string }[];
}

export function runReport(report: new () => Report, options?: RunOptions): Promise<Ran>;
