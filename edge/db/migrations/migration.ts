/** One schema version: statements applied together in one transaction. */
export interface Migration {
  version: number;
  name: string;
  statements: string[];
}
