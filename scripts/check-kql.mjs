// Checks KQL queries with Microsoft's Kusto language service (@kusto/language-service-next, the
// parser and semantic analyzer of Kusto.Language, compiled to JavaScript): each query is parsed
// and bound against the Application Insights `traces` table, so that an unknown column, function
// or operator, a type mismatch or a syntax error is reported, and the query's result columns are
// known. It does not run the query: no data, no Azure.
//
// Reads a JSON array of {"name", "query"} on standard input and writes, for each, {"name",
// "diagnostics": [{"severity", "start", "message"}], "columns": [{"name", "type"}]} as a JSON array
// on standard output. Exits 1 when any query has an error, 0 otherwise.
// Usage: node scripts/check-kql.mjs < queries.json  (infra/bicep/kql_test.go runs it)
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
require('@kusto/language-service-next/bridge.min.js');
require('@kusto/language-service-next/Kusto.Language.Bridge.min.js');
const K = globalThis.Kusto.Language;
const S = K.Symbols;
const T = S.ScalarTypes;

// The columns of Application Insights' `traces` table that the queries may read (the
// component-scoped schema: timestamp, message, customDimensions, ...).
const traces = new S.TableSymbol.$ctor4('traces', [
  new S.ColumnSymbol('timestamp', T.DateTime),
  new S.ColumnSymbol('message', T.String),
  new S.ColumnSymbol('severityLevel', T.Int),
  new S.ColumnSymbol('itemType', T.String),
  new S.ColumnSymbol('customDimensions', T.Dynamic),
  new S.ColumnSymbol('operation_Name', T.String),
  new S.ColumnSymbol('cloud_RoleName', T.String),
  new S.ColumnSymbol('cloud_RoleInstance', T.String),
]);
const db = new S.DatabaseSymbol.ctor('appinsights', [traces]);
const globals = K.GlobalState.Default.WithCluster(new S.ClusterSymbol.ctor('appinsights', [db])).WithDatabase(db);

const input = JSON.parse(readFileSync(0, 'utf8'));
let errors = 0;
const out = input.map(({ name, query }) => {
  const code = K.KustoCode.ParseAndAnalyze(query, globals);
  const list = code.GetDiagnostics();
  const diagnostics = [];
  for (let i = 0; i < list.Count; i++) {
    const d = list.getItem(i);
    diagnostics.push({ severity: d.Severity, start: d.Start, message: d.Message });
    if (d.Severity === 'Error') errors++;
  }
  const columns = [];
  const result = code.ResultType;
  if (result && result.Columns) {
    for (let i = 0; i < result.Columns.Count; i++) {
      const c = result.Columns.getItem(i);
      columns.push({ name: c.Name, type: c.Type.Name });
    }
  }
  return { name, diagnostics, columns };
});
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
process.exit(errors ? 1 : 0);
