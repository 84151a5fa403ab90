// Verifies webhook requests with the official Standard Webhooks library for JavaScript
// (npm standardwebhooks, pinned in package.json), an implementation independent of the sink's.
// stdin: a JSON array of {name, secret, headers: {name: value}, body}; stdout: a JSON object
// name -> "ok" or the library's error message. Run by sink/webhook_sign_test.go.
"use strict";
const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const out = {};
  for (const c of JSON.parse(input)) {
    try {
      new Webhook(c.secret).verify(c.body, c.headers, { jsonParse: false });
      out[c.name] = "ok";
    } catch (e) {
      out[c.name] = String(e.message || e);
    }
  }
  process.stdout.write(JSON.stringify(out));
});
