#!/usr/bin/env node
// azurite.js blob|queue [Azurite's options]: Azurite's blob or queue service, the version
// package.json pins, without its extent garbage collection. start_azurite (services.sh) runs it
// for tests and benchmarks, whose Azurite keeps its data in memory and lives for one run.
//
// Azurite's collection runs 10 minutes after a blob service starts (1 for queues) and again
// that long after each run ends. It pages through every blob and extent with a scan and a sort
// of the whole collection per page, so its time grows with the square of what was written, and
// the service answers no request meanwhile: after 80 s of uploads from 8 writers, a request sent
// when it began took over 120 s, where without it every request took under 0.3 s. Ten minutes
// into scripts/test.sh that froze Azurite for minutes, and tests whose workers had to tick within
// a deadline failed (issue 42). What it frees goes when the process exits.
"use strict";
const path = require("path");
const service = process.argv[2];
if (service !== "blob" && service !== "queue") {
  console.error("usage: azurite.js blob|queue [Azurite's options]");
  process.exit(2);
}
const src = path.join(__dirname, "..", "..", "node_modules", "azurite", "dist", "src", service);
// The GC manager reads the interval from this module when the service starts; the longest
// timeout Node keeps (a longer one fires at once).
require(path.join(src, "utils", "constants")).DEFAULT_GC_INTERVAL_MS = 2 ** 31 - 1;
process.argv.splice(2, 1); // Azurite parses its options from process.argv
require(path.join(src, "main"));
